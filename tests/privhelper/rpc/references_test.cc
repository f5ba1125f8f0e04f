// GenerationRefs: a collection's check and the start of a call exclude each other.
#include "privhelper/rpc/references.h"

#include "gtest/gtest.h"

namespace sn::privhelper {
namespace {

TEST(GenerationRefsTest, ACallInFlightRefusesTheCollectionCheckUntilItReturns) {
  GenerationRefs refs;
  {
    std::optional<GenerationRefs::Ref> call = refs.Acquire(3);
    ASSERT_TRUE(call.has_value());
    EXPECT_EQ(refs.calls(3), 1);
    EXPECT_EQ(refs.BeginCollect(3), 1);
    EXPECT_FALSE(refs.collecting());
    EXPECT_EQ(refs.BeginCollect(4), 0) << "another generation is not held by it";
    refs.EndCollect(4);
  }
  EXPECT_EQ(refs.calls(3), 0);
  EXPECT_EQ(refs.BeginCollect(3), 0);
  EXPECT_TRUE(refs.collecting());
}

TEST(GenerationRefsTest, NoCallStartsOnAGenerationWhileItsCollectionRuns) {
  GenerationRefs refs;
  ASSERT_EQ(refs.BeginCollect(3), 0);
  EXPECT_FALSE(refs.Acquire(3).has_value());
  EXPECT_TRUE(refs.Acquire(2).has_value());
  refs.EndCollect(3);
  EXPECT_TRUE(refs.Acquire(3).has_value());
}

}  // namespace
}  // namespace sn::privhelper

// The generation store's caps (second audit: 20,000 BeginPreparation calls for new generation
// numbers left 40,006 files and 242 MB of privhelper's memory): a generation privhelper does
// not record yet is refused storage_exhausted while max_generations records are held or two
// generations are preparing; a generation it records already is never refused by them.
#include <string>

#include "gtest/gtest.h"
#include "privhelper/store/generations.h"
#include "tests/privhelper/store/store_fixture.h"

namespace sn::privhelper::store {
namespace {

class GenerationCapTest : public StoreTest {
 protected:
  absl::StatusOr<std::vector<std::string>> Begin(int64_t g) {
    const std::string spec = Spec(g, {image_, helper_});
    return generations_->Begin(g, spec, Sha256Hex(spec));
  }
};

TEST_F(GenerationCapTest, AThirdGenerationPreparingIsRefusedUntilOneFinishes) {
  ASSERT_TRUE(Adopt(Release({image_, helper_})).ok());
  ASSERT_TRUE(Begin(1).ok());
  ASSERT_TRUE(Begin(2).ok());
  for (int64_t g = 3; g < 40; ++g) {
    absl::StatusOr<std::vector<std::string>> third = Begin(g);
    ASSERT_FALSE(third.ok()) << g;
    EXPECT_EQ(DiagnosticOf(third.status()), Diagnostic::kStorageExhausted) << third.status();
  }
  EXPECT_EQ(generations_->Statuses().size(), 2u);
  // Nothing of the refused ones was written.
  EXPECT_TRUE(Slurp(Gen("3.specification")).empty());
  EXPECT_TRUE(Slurp(Gen("3.preparing")).empty());
  // The ones it holds go on: a Begin again (a resume) is not refused, and once one is ready
  // another can begin.
  ASSERT_TRUE(Begin(1).ok());
  for (const ArtifactBytes& a : {image_, helper_}) ASSERT_TRUE(Put(1, a, a.bytes).ok());
  ASSERT_TRUE(generations_->Finish(1, importer_).ok());
  EXPECT_TRUE(Begin(3).ok());
}

TEST_F(GenerationCapTest, BeyondMaxGenerationsANewGenerationIsRefusedAndHeldOnesStillServe) {
  generations_->SetMaxGenerations(3);
  for (int64_t g = 1; g <= 3; ++g) ASSERT_TRUE(Prepare(g, {image_, helper_}).ok()) << g;
  absl::StatusOr<std::vector<std::string>> fourth = Begin(4);
  ASSERT_FALSE(fourth.ok());
  EXPECT_EQ(DiagnosticOf(fourth.status()), Diagnostic::kStorageExhausted) << fourth.status();
  EXPECT_NE(std::string(fourth.status().message()).find("max_generations"), std::string::npos);
  // A held generation is still "begun" (nothing to do) and served.
  absl::StatusOr<std::vector<std::string>> again = Begin(3);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->empty());
  EXPECT_TRUE(generations_->Ready(3));
}

}  // namespace
}  // namespace sn::privhelper::store

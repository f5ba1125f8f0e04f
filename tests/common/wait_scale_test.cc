#include "common/wait_scale.h"

#include <gtest/gtest.h>

namespace sn {
namespace {

TEST(WaitScaleTest, ParsesOnlyADecimalFromOneToSixty) {
  for (const char* ok : {"1", "4", "12", "60"}) {
    auto d = ParseWaitDivisor(ok);
    ASSERT_TRUE(d.ok()) << ok << ": " << d.status();
  }
  EXPECT_EQ(*ParseWaitDivisor("4"), 4);
  EXPECT_EQ(*ParseWaitDivisor("60"), 60);
  for (const char* bad : {"", "0", "00", "61", "99", "100", "-1", "+4", " 4", "4 ", "4s", "x"}) {
    EXPECT_FALSE(ParseWaitDivisor(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseWaitDivisor(nullptr).ok());
}

TEST(WaitScaleTest, WaitsAreTheSpecsUntilATestBuildSetsADivisor) {
  EXPECT_EQ(ScaledWait(absl::Seconds(60)), absl::Seconds(60));
  SetWaitDivisor(4);
  EXPECT_EQ(ScaledWait(absl::Seconds(60)), absl::Seconds(15));
  EXPECT_EQ(ScaledWait(absl::Minutes(30)), absl::Seconds(450));
  SetWaitDivisor(1);
  EXPECT_EQ(ScaledWait(absl::Seconds(60)), absl::Seconds(60));
}

}  // namespace
}  // namespace sn

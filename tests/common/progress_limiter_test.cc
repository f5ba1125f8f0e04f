// common/progress_limiter.h: which progress updates get a line, on a driven clock.
#include "common/progress_limiter.h"

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace sn {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Feeds one stage's updates of `step` bytes each up to `total`, `every` apart; returns the
// done values that got a line.
std::vector<uint64_t> Lines(ProgressLimiter& limiter, SimulatedClock& clock, uint64_t total,
                            uint64_t step, absl::Duration every) {
  std::vector<uint64_t> lines;
  for (uint64_t done = 0; done <= total; done += step) {
    if (limiter.Due(clock.Monotonic(), "upload", done, total)) lines.push_back(done);
    clock.Advance(every);
  }
  return lines;
}

TEST(ProgressLimiterTest, FastWorkGetsALinePerTenthAndTheEndNotOnePerUpdate) {
  SimulatedClock clock;
  ProgressLimiter limiter;
  // 100 MiB reported per MiB within one second: the first, every 10 MiB, and the end.
  std::vector<uint64_t> lines = Lines(limiter, clock, 100 * kMiB, kMiB, absl::Milliseconds(10));
  std::vector<uint64_t> want;
  for (uint64_t d = 0; d <= 100; d += 10) want.push_back(d * kMiB);
  EXPECT_EQ(lines, want);
}

TEST(ProgressLimiterTest, SlowWorkGetsALineEveryFiveSeconds) {
  SimulatedClock clock;
  ProgressLimiter limiter;
  // 100 MiB at 1 MiB/s: a tenth takes 10 s, so the 5-second line always comes first (a tenth
  // is counted from the last line).
  std::vector<uint64_t> lines = Lines(limiter, clock, 100 * kMiB, kMiB, absl::Seconds(1));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), 0u);
  EXPECT_EQ(lines.back(), 100 * kMiB);
  for (size_t i = 1; i < lines.size(); ++i) EXPECT_EQ(lines[i] - lines[i - 1], 5 * kMiB) << i;
}

TEST(ProgressLimiterTest, AStageChangeIsDueAtOnceAndRestartsTheCount) {
  SimulatedClock clock;
  ProgressLimiter limiter;
  const MonoTime t = clock.Monotonic();
  EXPECT_TRUE(limiter.Due(t, "release", 0, 0));
  EXPECT_FALSE(limiter.Due(t + absl::Seconds(1), "release", 0, 0));
  EXPECT_TRUE(limiter.Due(t + absl::Seconds(1), "upload", 0, 10 * kMiB));
  EXPECT_FALSE(limiter.Due(t + absl::Seconds(1), "upload", kMiB - 1, 10 * kMiB));
  EXPECT_TRUE(limiter.Due(t + absl::Seconds(1), "upload", kMiB, 10 * kMiB));
  EXPECT_TRUE(limiter.Due(t + absl::Seconds(1), "import", 10 * kMiB, 10 * kMiB));
}

TEST(ProgressLimiterTest, WithoutATotalOnlyStagesAndTimeAreDue) {
  SimulatedClock clock;
  ProgressLimiter limiter;
  const MonoTime t = clock.Monotonic();
  EXPECT_TRUE(limiter.Due(t, "specification", 0, 0));
  EXPECT_FALSE(limiter.Due(t + absl::Milliseconds(4999), "specification", 1 << 30, 0));
  EXPECT_TRUE(limiter.Due(t + absl::Seconds(5), "specification", 1 << 30, 0));
}

TEST(ProgressLimiterTest, TheEndIsDueOnceEvenRightAfterALine) {
  SimulatedClock clock;
  ProgressLimiter limiter;
  const MonoTime t = clock.Monotonic();
  EXPECT_TRUE(limiter.Due(t, "a", 95, 100));
  EXPECT_TRUE(limiter.Due(t, "a", 100, 100));   // complete: due though less than a tenth
  EXPECT_FALSE(limiter.Due(t, "a", 100, 100));  // said already
}

TEST(ProgressLimiterTest, AStalledOrRestartedCountIsNoStep) {
  SimulatedClock clock;
  ProgressLimiter limiter;
  const MonoTime t = clock.Monotonic();
  EXPECT_TRUE(limiter.Due(t, "a", 50, 100));
  EXPECT_FALSE(limiter.Due(t + absl::Seconds(1), "a", 0, 100));   // started again from 0
  EXPECT_FALSE(limiter.Due(t + absl::Seconds(2), "a", 55, 100));
  EXPECT_TRUE(limiter.Due(t + absl::Seconds(5), "a", 55, 100));   // but time still passes
}

TEST(ProgressLimiterTest, HugeCountsDoNotOverflow) {
  SimulatedClock clock;
  ProgressLimiter limiter;
  const MonoTime t = clock.Monotonic();
  const uint64_t total = UINT64_MAX - 1;
  EXPECT_TRUE(limiter.Due(t, "a", 0, total));
  EXPECT_FALSE(limiter.Due(t, "a", total / 20, total));
  EXPECT_TRUE(limiter.Due(t, "a", total / 10 + 1, total));
  EXPECT_TRUE(limiter.Due(t, "a", total, total));
}

}  // namespace
}  // namespace sn

// The accept loop's pacing (privhelper/rpc/throttle.h), on simulated monotonic time.
#include "privhelper/rpc/throttle.h"

#include <optional>

#include "gtest/gtest.h"

namespace sn::privhelper {
namespace {

TEST(LogRateLimiterTest, FirstEventLogsThenOneLinePerIntervalCarryingTheSuppressedCount) {
  LogRateLimiter limiter(absl::Seconds(10));
  const MonoTime t0 = absl::Seconds(100);
  EXPECT_EQ(limiter.Add(t0), std::optional<uint64_t>(1));
  // A flood within the interval is counted, not logged.
  for (int i = 1; i <= 1000; ++i) {
    EXPECT_EQ(limiter.Add(t0 + absl::Milliseconds(i)), std::nullopt);
  }
  EXPECT_EQ(limiter.Add(t0 + absl::Seconds(9)), std::nullopt);
  // The next line reports those 1001 and itself.
  EXPECT_EQ(limiter.Add(t0 + absl::Seconds(10)), std::optional<uint64_t>(1002));
  EXPECT_EQ(limiter.Add(t0 + absl::Seconds(11), 5), std::nullopt);
  EXPECT_EQ(limiter.TakeSuppressed(), 5u);
  EXPECT_EQ(limiter.TakeSuppressed(), 0u);
}

TEST(LogRateLimiterTest, QuietPeriodLetsTheNextEventLogAtOnce) {
  LogRateLimiter limiter(absl::Seconds(10));
  EXPECT_TRUE(limiter.Add(absl::Seconds(1)).has_value());
  EXPECT_EQ(limiter.Add(absl::Seconds(500), 3), std::optional<uint64_t>(3));
}

TEST(BackoffTest, DoublesFromTheInitialPauseUpToTheCapAndResets) {
  Backoff b(absl::Milliseconds(50), absl::Seconds(1));
  EXPECT_EQ(b.Next(), absl::Milliseconds(50));
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(200));
  EXPECT_EQ(b.Next(), absl::Milliseconds(400));
  EXPECT_EQ(b.Next(), absl::Milliseconds(800));
  EXPECT_EQ(b.Next(), absl::Seconds(1));
  EXPECT_EQ(b.Next(), absl::Seconds(1));
  b.Reset();
  EXPECT_EQ(b.Next(), absl::Milliseconds(50));
}

}  // namespace
}  // namespace sn::privhelper

#include "common/clock.h"

#include <vector>

#include "gtest/gtest.h"

namespace sn {
namespace {

TEST(SimulatedClock, TimersFireInDeadlineOrderOnlyWhenTimeAdvances) {
  SimulatedClock clock;
  std::vector<int> fired;
  auto t2 = clock.After(absl::Seconds(2), [&] { fired.push_back(2); });
  auto t1 = clock.After(absl::Seconds(1), [&] { fired.push_back(1); });
  EXPECT_TRUE(fired.empty());
  clock.Advance(absl::Milliseconds(999));
  EXPECT_TRUE(fired.empty());
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(fired, (std::vector<int>{1, 2}));
  EXPECT_EQ(clock.Monotonic(), absl::Milliseconds(5999));
}

TEST(SimulatedClock, DestroyedTimerNeverFires) {
  SimulatedClock clock;
  bool fired = false;
  { auto t = clock.After(absl::Seconds(1), [&] { fired = true; }); }
  clock.Advance(absl::Seconds(2));
  EXPECT_FALSE(fired);
  EXPECT_EQ(clock.pending_timers(), 0u);
}

TEST(SimulatedClock, CallbackSeesItsOwnDeadlineAndMayReschedule) {
  SimulatedClock clock;
  std::vector<absl::Duration> at;
  std::unique_ptr<Timer> t;
  std::function<void()> tick = [&] {
    at.push_back(clock.Monotonic());
    if (at.size() < 3) t = clock.After(absl::Seconds(10), tick);
  };
  t = clock.After(absl::Seconds(10), tick);
  clock.Advance(absl::Seconds(35));
  EXPECT_EQ(at, (std::vector<absl::Duration>{absl::Seconds(10), absl::Seconds(20),
                                             absl::Seconds(30)}));
}

TEST(SimulatedClock, WallClockMovesWithMonotonic) {
  SimulatedClock clock(absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(103));
}

}  // namespace
}  // namespace sn

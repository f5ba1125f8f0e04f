// The asio TimerQueue: ordering, cancellation, and a handle destroyed inside its callback.
#include "common/asio_timer_queue.h"

#include <boost/asio/io_context.hpp>
#include <vector>

#include "gtest/gtest.h"

namespace sn {
namespace {

TEST(AsioTimerQueueTest, FiresInDeadlineOrderAndHonoursCancellation) {
  boost::asio::io_context io;
  AsioTimerQueue timers(io);
  std::vector<int> fired;
  auto a = timers.After(absl::Milliseconds(20), [&] { fired.push_back(2); });
  auto b = timers.After(absl::Milliseconds(1), [&] { fired.push_back(1); });
  auto c = timers.After(absl::Milliseconds(5), [&] { fired.push_back(99); });
  c->Cancel();
  auto d = timers.After(absl::Milliseconds(5), [&] { fired.push_back(98); });
  d.reset();  // destroying the handle cancels
  io.run();
  EXPECT_EQ(fired, (std::vector<int>{1, 2}));
}

TEST(AsioTimerQueueTest, HandleMayBeReplacedFromInsideItsOwnCallback) {
  boost::asio::io_context io;
  AsioTimerQueue timers(io);
  std::unique_ptr<Timer> handle;
  int ticks = 0;
  std::function<void()> tick = [&] {
    if (++ticks < 3) handle = timers.After(absl::ZeroDuration(), tick);
  };
  handle = timers.After(absl::ZeroDuration(), tick);
  io.run();
  EXPECT_EQ(ticks, 3);
}

}  // namespace
}  // namespace sn

// sn::TimerQueue on an asio io_context (steady_timer). Callbacks run on the io_context's
// thread; a cancelled timer's callback never runs.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_ASIO_TIMER_QUEUE_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_ASIO_TIMER_QUEUE_H_

#include <functional>
#include <memory>

#include "common/clock.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace sn::devcore {

class AsioTimerQueue final : public TimerQueue {
 public:
  // REQUIRES: `ioc` outlives every Timer this queue returns, and After() and Timer::Cancel()
  // run on the thread that runs `ioc`.
  explicit AsioTimerQueue(boost::asio::io_context& ioc) : ioc_(ioc) {}
  std::unique_ptr<Timer> After(absl::Duration delay, std::function<void()> fn) override;

 private:
  boost::asio::io_context& ioc_;
};

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_ASIO_TIMER_QUEUE_H_

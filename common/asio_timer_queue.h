// sn::TimerQueue on an asio io_context (steady_timer), shared by the agent and devcore event
// loops. Callbacks run on the io_context's thread; a cancelled timer's callback never runs.
// REQUIRES: the io_context outlives every Timer, and After()/Cancel() run on its thread.
// Include only from asio code: it is kept out of the widely included common/clock.h.
#ifndef SANDBOX_NODE_COMMON_ASIO_TIMER_QUEUE_H_
#define SANDBOX_NODE_COMMON_ASIO_TIMER_QUEUE_H_

#include <functional>
#include <memory>

#include "common/clock.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace sn {

class AsioTimerQueue final : public TimerQueue {
 public:
  explicit AsioTimerQueue(boost::asio::io_context& io) : io_(io) {}
  // The returned handle may be destroyed from inside its own callback.
  std::unique_ptr<Timer> After(absl::Duration delay, std::function<void()> fn) override;

 private:
  boost::asio::io_context& io_;
};

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_ASIO_TIMER_QUEUE_H_

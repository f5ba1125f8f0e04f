// TimerQueue on an asio io_context (the agent's event loop). Callbacks run on the loop thread.
#ifndef SANDBOX_NODE_AGENT_ASIO_TIMERS_H_
#define SANDBOX_NODE_AGENT_ASIO_TIMERS_H_

#include <functional>
#include <memory>

#include "common/clock.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace sn::agent {

class AsioTimerQueue final : public TimerQueue {
 public:
  explicit AsioTimerQueue(boost::asio::io_context& io) : io_(io) {}
  // The returned handle may be destroyed from inside its own callback.
  std::unique_ptr<Timer> After(absl::Duration delay, std::function<void()> fn) override;

 private:
  boost::asio::io_context& io_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_ASIO_TIMERS_H_

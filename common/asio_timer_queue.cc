#include "common/asio_timer_queue.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <utility>

namespace sn {
namespace {

struct TimerState {
  explicit TimerState(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
  bool cancelled = false;
  std::function<void()> fn;
};

class AsioTimer final : public Timer {
 public:
  explicit AsioTimer(std::shared_ptr<TimerState> s) : state_(std::move(s)) {}
  ~AsioTimer() override { Cancel(); }
  void Cancel() override {
    if (!state_) return;
    state_->cancelled = true;
    state_->fn = nullptr;
    state_->timer.cancel();
    state_.reset();
  }

 private:
  std::shared_ptr<TimerState> state_;
};

}  // namespace

std::unique_ptr<Timer> AsioTimerQueue::After(absl::Duration delay, std::function<void()> fn) {
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  auto state = std::make_shared<TimerState>(io_);
  state->fn = std::move(fn);
  state->timer.expires_after(std::chrono::nanoseconds(absl::ToInt64Nanoseconds(delay)));
  state->timer.async_wait([state](const boost::system::error_code&) {
    if (state->cancelled) return;
    std::function<void()> fn = std::move(state->fn);
    state->cancelled = true;
    if (fn) fn();
  });
  return std::make_unique<AsioTimer>(std::move(state));
}

}  // namespace sn

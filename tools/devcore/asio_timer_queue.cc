#include "tools/devcore/asio_timer_queue.h"

#include <chrono>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/time/time.h"

namespace sn::devcore {
namespace {

struct TimerState {
  explicit TimerState(boost::asio::io_context& ioc) : timer(ioc) {}
  boost::asio::steady_timer timer;
  std::function<void()> fn;  // empty once fired or cancelled
};

class AsioTimer final : public Timer {
 public:
  explicit AsioTimer(std::shared_ptr<TimerState> state) : state_(std::move(state)) {}
  ~AsioTimer() override { Cancel(); }
  void Cancel() override {
    if (state_ == nullptr) return;
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
  auto state = std::make_shared<TimerState>(ioc_);
  state->fn = std::move(fn);
  state->timer.expires_after(absl::ToChronoNanoseconds(delay));
  state->timer.async_wait([state](const boost::system::error_code& ec) {
    if (ec || !state->fn) return;
    std::function<void()> f = std::move(state->fn);
    state->fn = nullptr;
    f();
  });
  return std::make_unique<AsioTimer>(std::move(state));
}

}  // namespace sn::devcore

#include "common/clock.h"

#include <time.h>

#include <utility>

#include "absl/time/clock.h"

namespace sn {

absl::Time SystemClock::Now() const { return absl::Now(); }

MonoTime SystemClock::Monotonic() const {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return absl::DurationFromTimespec(ts);
}

SystemClock* SystemClock::Get() {
  static SystemClock* clock = new SystemClock();
  return clock;
}

class SimulatedClock::SimTimer final : public Timer {
 public:
  SimTimer(SimulatedClock* clock, Key key, std::weak_ptr<bool> alive)
      : clock_(clock), key_(key), alive_(std::move(alive)) {}
  ~SimTimer() override { Cancel(); }
  void Cancel() override {
    if (auto a = alive_.lock()) clock_->CancelKey(key_);
    alive_.reset();
  }

 private:
  SimulatedClock* clock_;
  Key key_;
  std::weak_ptr<bool> alive_;
};

SimulatedClock::SimulatedClock(absl::Time start) : now_(start) {}
SimulatedClock::~SimulatedClock() { alive_.reset(); }

std::unique_ptr<Timer> SimulatedClock::After(absl::Duration delay, std::function<void()> fn) {
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  Key key{mono_ + delay, next_seq_++};
  timers_.emplace(key, std::move(fn));
  return std::make_unique<SimTimer>(this, key, alive_);
}

void SimulatedClock::Advance(absl::Duration d) {
  const MonoTime end = mono_ + d;
  while (!timers_.empty() && timers_.begin()->first.due <= end) {
    auto it = timers_.begin();
    absl::Duration step = it->first.due - mono_;
    if (step > absl::ZeroDuration()) {
      mono_ += step;
      now_ += step;
    }
    std::function<void()> fn = std::move(it->second);
    timers_.erase(it);
    fn();
  }
  now_ += end - mono_;
  mono_ = end;
}

}  // namespace sn

// Clock and timer seams. Every component takes time from a Clock so tests drive it.
//
// Two notions of time: `Now()` is wall-clock time (for timestamps such as observed_at);
// `Monotonic()` never goes backwards and is what budgets, deadlines and idle timers use.
// Timers are scheduled on monotonic time and fire on the owner's event loop.
#ifndef SANDBOX_NODE_COMMON_CLOCK_H_
#define SANDBOX_NODE_COMMON_CLOCK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "absl/time/time.h"

namespace sn {

// Monotonic instants are durations since an arbitrary per-process origin.
using MonoTime = absl::Duration;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  virtual MonoTime Monotonic() const = 0;
};

// Handle to a scheduled callback. Destroying the handle cancels the timer.
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void Cancel() = 0;
};

// Schedules callbacks on an event loop. Callbacks never run inside Schedule() itself.
class TimerQueue {
 public:
  virtual ~TimerQueue() = default;
  virtual std::unique_ptr<Timer> After(absl::Duration delay, std::function<void()> fn) = 0;
};

// Real time (CLOCK_REALTIME / CLOCK_MONOTONIC).
class SystemClock final : public Clock {
 public:
  absl::Time Now() const override;
  MonoTime Monotonic() const override;
  static SystemClock* Get();
};

// A simulated clock and timer queue for tests: time moves only when Advance() is called, and
// timers whose deadline is reached fire, in deadline order, during Advance().
class SimulatedClock final : public Clock, public TimerQueue {
 public:
  explicit SimulatedClock(absl::Time start = absl::FromUnixSeconds(1795000000));
  ~SimulatedClock() override;

  absl::Time Now() const override { return now_; }
  MonoTime Monotonic() const override { return mono_; }
  std::unique_ptr<Timer> After(absl::Duration delay, std::function<void()> fn) override;

  // Moves time forward by `d`, firing every timer that becomes due (including timers that
  // callbacks schedule within the window).
  void Advance(absl::Duration d);
  // Number of timers still scheduled.
  size_t pending_timers() const { return timers_.size(); }

 private:
  class SimTimer;
  struct Key {
    MonoTime due;
    uint64_t seq;
    bool operator<(const Key& o) const { return due < o.due || (due == o.due && seq < o.seq); }
  };
  void CancelKey(const Key& k) { timers_.erase(k); }

  absl::Time now_;
  MonoTime mono_ = absl::ZeroDuration();
  uint64_t next_seq_ = 0;
  std::map<Key, std::function<void()>> timers_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_CLOCK_H_

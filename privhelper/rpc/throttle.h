// Pacing for privhelper's accept loop (listener.h): a log rate limiter, so that a flood of
// refused connections cannot flood the journal, and a bounded exponential backoff, so that a
// descriptor shortage cannot make the loop spin.
//
// Time is passed in (monotonic, common/clock.h), so tests drive both without sleeping.
// Not thread-safe: each instance belongs to one thread (the accept thread).
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_THROTTLE_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_THROTTLE_H_

#include <cstdint>
#include <optional>

#include "absl/time/time.h"
#include "common/clock.h"

namespace sn::privhelper {

// At most one log line per `interval` for one kind of event; each line carries the number of
// events since the previous line, so nothing is lost from the count.
class LogRateLimiter {
 public:
  explicit LogRateLimiter(absl::Duration interval) : interval_(interval) {}

  // Counts `count` events at `now`. When a line is due (the first event, then the first
  // event at least `interval` after the previous line) returns the events to report: these
  // and every event suppressed since the previous line. Otherwise nullopt (suppressed).
  std::optional<uint64_t> Add(MonoTime now, uint64_t count = 1);

  // Events suppressed since the last line, for a final line (e.g. at shutdown); resets them.
  uint64_t TakeSuppressed();

 private:
  const absl::Duration interval_;
  std::optional<MonoTime> last_line_;
  uint64_t suppressed_ = 0;
};

// initial, 2 * initial, 4 * initial, ... capped at `max`; Reset() starts over.
class Backoff {
 public:
  Backoff(absl::Duration initial, absl::Duration max) : initial_(initial), max_(max) {}
  absl::Duration Next();
  void Reset() { next_ = absl::ZeroDuration(); }

 private:
  const absl::Duration initial_;
  const absl::Duration max_;
  absl::Duration next_ = absl::ZeroDuration();
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_THROTTLE_H_

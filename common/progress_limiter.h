// Which progress updates of a long piece of work (a download, a preparation) get a line in a
// log or on a terminal: enough to show it moving, at a bounded rate.
//
// An update is due when
//   - it is the first, or its stage changed (a phase, an artifact: the caller's key);
//   - the work just completed (done >= total > 0) and the last line did not say so;
//   - done grew by a tenth of total or more since the last line;
//   - or 5 s passed since the last line;
// whichever comes first; each due update becomes "the last line". So a stage gets at most
// 12 lines (its first, ten tenths, its end) plus one per 5 s, however often it reports. Time
// is the caller's (a Clock's Monotonic()), so tests drive it. Not thread-safe.
#ifndef SANDBOX_NODE_COMMON_PROGRESS_LIMITER_H_
#define SANDBOX_NODE_COMMON_PROGRESS_LIMITER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "common/clock.h"

namespace sn {

inline constexpr absl::Duration kProgressLineInterval = absl::Seconds(5);
inline constexpr int kProgressLineSteps = 10;  // a line per tenth of the total

class ProgressLimiter {
 public:
  ProgressLimiter() = default;
  ProgressLimiter(absl::Duration interval, int steps) : interval_(interval), steps_(steps) {}

  // True when this update is due a line (and it is then remembered as the last line).
  bool Due(MonoTime now, std::string_view stage, uint64_t done, uint64_t total);

 private:
  absl::Duration interval_ = kProgressLineInterval;
  int steps_ = kProgressLineSteps;
  bool any_ = false;
  std::string stage_;
  uint64_t done_ = 0;
  uint64_t total_ = 0;
  MonoTime at_ = absl::ZeroDuration();
};

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_PROGRESS_LIMITER_H_

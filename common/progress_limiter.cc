#include "common/progress_limiter.h"

namespace sn {

bool ProgressLimiter::Due(MonoTime now, std::string_view stage, uint64_t done, uint64_t total) {
  bool due = !any_ || stage != stage_ || now - at_ >= interval_;
  if (!due && total > 0) {
    const bool complete = done >= total;
    const bool said_complete = total_ == total && done_ >= total;
    // done - done_ >= total / steps, without overflow; a smaller done (a restart) is no step.
    const bool step = steps_ > 0 && done > done_ &&
                      (done - done_) >= total / static_cast<uint64_t>(steps_);
    due = (complete && !said_complete) || step;
  }
  if (!due) return false;
  any_ = true;
  stage_ = std::string(stage);
  done_ = done;
  total_ = total;
  at_ = now;
  return true;
}

}  // namespace sn

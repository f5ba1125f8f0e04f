#include "privhelper/rpc/throttle.h"

#include <algorithm>

namespace sn::privhelper {

std::optional<uint64_t> LogRateLimiter::Add(MonoTime now, uint64_t count) {
  suppressed_ += count;
  if (last_line_.has_value() && now - *last_line_ < interval_) return std::nullopt;
  last_line_ = now;
  return TakeSuppressed();
}

uint64_t LogRateLimiter::TakeSuppressed() {
  uint64_t n = suppressed_;
  suppressed_ = 0;
  return n;
}

absl::Duration Backoff::Next() {
  next_ = next_ == absl::ZeroDuration() ? initial_ : std::min(next_ * 2, max_);
  return next_;
}

}  // namespace sn::privhelper

#include "agent/connection/backoff.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/random/random.h"
#include "common/wire/limits.h"

namespace sn::agent {

UniformRandom DefaultUniformRandom() {
  auto gen = std::make_shared<absl::BitGen>();
  return [gen]() { return absl::Uniform<double>(*gen, 0.0, 1.0); };
}

Backoff::Backoff(UniformRandom random, absl::Duration initial, absl::Duration cap)
    : random_(std::move(random)), initial_(initial), cap_(cap), ceiling_(initial) {}

Backoff::Backoff(UniformRandom random)
    : Backoff(std::move(random), absl::Seconds(wire::kBackoffInitialSeconds),
              absl::Seconds(wire::kBackoffMaxSeconds)) {}

absl::Duration Backoff::Next() {
  double u = random_();
  u = std::clamp(u, 0.0, 1.0);
  absl::Duration delay = ceiling_ * u;
  ceiling_ = std::min(ceiling_ * 2, cap_);
  return delay;
}

}  // namespace sn::agent

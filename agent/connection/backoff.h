// Reconnect backoff (spec/wire.md §1): exponential with full jitter, 1 s initial, x2, capped
// at 60 s; a connection that stayed live for 60 s resets it.
#ifndef SANDBOX_NODE_AGENT_CONNECTION_BACKOFF_H_
#define SANDBOX_NODE_AGENT_CONNECTION_BACKOFF_H_

#include <functional>

#include "absl/time/time.h"

namespace sn::agent {

// A source of uniformly distributed doubles in [0, 1). Injected so tests are deterministic.
using UniformRandom = std::function<double()>;
// The production source (absl::BitGen).
UniformRandom DefaultUniformRandom();

class Backoff {
 public:
  Backoff(UniformRandom random, absl::Duration initial, absl::Duration cap);
  // With the protocol's constants.
  explicit Backoff(UniformRandom random);

  // The delay before the next attempt: uniform in [0, ceiling], where the ceiling starts at
  // `initial` and doubles with every call up to `cap`.
  absl::Duration Next();
  // The fixed maximum delay (used after a 4003 identity mismatch).
  absl::Duration Max() const { return cap_; }
  // Back to the initial ceiling (after a connection stayed live long enough).
  void Reset() { ceiling_ = initial_; }
  absl::Duration ceiling() const { return ceiling_; }

 private:
  UniformRandom random_;
  absl::Duration initial_;
  absl::Duration cap_;
  absl::Duration ceiling_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_BACKOFF_H_

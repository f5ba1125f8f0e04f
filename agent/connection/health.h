// The seam between the connection state machine and whatever measures the node for health reports
// (spec/wire.md §3 health). The production source (agent/health/probe_health.h) probes privhelper
// afresh for every report (never cached) and adds host measurements; tests use a fake.
// Single-threaded: Collect is called on the agent's event loop and `done` runs there.
#ifndef SANDBOX_NODE_AGENT_CONNECTION_HEALTH_H_
#define SANDBOX_NODE_AGENT_CONNECTION_HEALTH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/wire/frames.h"

namespace sn::agent {

// privhelper's capacity limits (its own configuration, spec §3 ranges), as its probe reported
// them. The agent only reports them (hello, enroll); privhelper enforces them.
struct ProviderLimits {
  int64_t max_active = 1;
  int64_t max_retained = 0;
  bool operator==(const ProviderLimits&) const = default;
};

struct HealthReport {
  wire::Health health;
  // From the same probe; hello carries it (the wire never carries probe text).
  std::string backend_fingerprint;
  // From the same probe when it succeeded with limits in the spec's ranges; hello carries them
  // (else the limits of the agent's start-up probe, ConnectionParams).
  std::optional<ProviderLimits> limits;
};

// Produces health reports. Collect is asynchronous: `done` runs later on the owner's event
// loop (it may also run before Collect returns in tests). Each call probes again.
class HealthSource {
 public:
  virtual ~HealthSource() = default;
  virtual void Collect(std::function<void(HealthReport)> done) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_HEALTH_H_

// Health reports (spec/wire.md §3 health): provider readiness from a fresh provider probe for
// every report (never cached), host measurements, and the active operations.
#ifndef SANDBOX_NODE_AGENT_HEALTH_H_
#define SANDBOX_NODE_AGENT_HEALTH_H_

#include <functional>
#include <string>
#include <vector>

#include "common/wire/frames.h"

namespace sn::agent {

struct HealthReport {
  wire::Health health;
  // From the same probe; hello carries it (the wire never carries probe text).
  std::string backend_fingerprint;
};

// Produces health reports. Collect is asynchronous: `done` runs later on the owner's event
// loop (it may also run before Collect returns in tests). Each call probes again.
class HealthSource {
 public:
  virtual ~HealthSource() = default;
  virtual void Collect(std::function<void(HealthReport)> done) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_HEALTH_H_

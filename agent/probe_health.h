// The production HealthSource: a fresh privhelper probe for every report, host measurements
// and the time of the report. Probe errors are logged here and never reach the wire: an
// unreachable privhelper reports provider_ready false with provider_unavailable.
#ifndef SANDBOX_NODE_AGENT_PROBE_HEALTH_H_
#define SANDBOX_NODE_AGENT_PROBE_HEALTH_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "agent/health.h"
#include "agent/host_metrics.h"
#include "agent/privhelper_client.h"
#include "common/clock.h"

namespace sn::agent {

// RFC 3339 UTC with "Z" and millisecond precision, e.g. 2026-11-29T12:00:00.000Z.
std::string FormatTimestamp(absl::Time t);

class ProbeHealthSource final : public HealthSource {
 public:
  // `generation` is the one the node serves (its enrolled generation); `installation_id` the
  // identity it enrolled with: a privhelper that owns another identity is not this node's
  // provider, and the report says ownership_refused.
  ProbeHealthSource(ProviderProber* prober, HostMetricsSource* host, const Clock* clock,
                    int64_t generation, std::string installation_id);
  void Collect(std::function<void(HealthReport)> done) override;

 private:
  ProviderProber* prober_;
  HostMetricsSource* host_;
  const Clock* clock_;
  int64_t generation_;
  std::string installation_id_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_PROBE_HEALTH_H_

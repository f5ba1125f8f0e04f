// The production HealthSource: a fresh privhelper probe for every report, host measurements
// and the time of the report. Probe errors are logged here and never reach the wire: an
// unreachable privhelper reports provider_ready false with provider_unavailable.
//   - provider_ready is privhelper's readiness, but false with ownership_refused when
//     privhelper owns another installation identity than the node enrolled with, and false
//     when it does not hold the enrolled generation (it would refuse every request:
//     docs/protocol.md 10), with `not_held_diagnostic()` (the generation manager's: the last
//     failure of the enrolled generation's preparation, else provider_unavailable). A
//     generation-managing node probes without naming a generation and skips that check: it
//     reports readiness per generation (observations), and Connection drops provider_ready.
//   - `on_probe` sees every probe of this installation's privhelper first (the generation
//     manager takes privhelper's generation reports from it, and prepares the enrolled
//     generation again when it is not held).
//   - `on_probe_failed` sees every probe that reached no privhelper of this installation
//     (unreachable, or another installation identity), with the diagnostic reported: no
//     generation is ready meanwhile (docs/protocol.md 20a).
//   - host.sandboxes_active / sandboxes_retained are privhelper's counts of this installation's
//     sandboxes from the same probe; when a probe could not count, the last counted values of
//     this process are reported (0 before the first count; docs/protocol.md 10h).
//   - limits: privhelper's, when the probe reported them within the spec's ranges.
// Single-threaded: Collect and its callback run on the event loop.
#ifndef SANDBOX_NODE_AGENT_HEALTH_PROBE_HEALTH_H_
#define SANDBOX_NODE_AGENT_HEALTH_PROBE_HEALTH_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "agent/connection/health.h"
#include "agent/health/host_metrics.h"
#include "agent/privhelper_rpc/privhelper_client.h"
#include "common/clock.h"

namespace sn::agent {

// RFC 3339 UTC with "Z" and millisecond precision, e.g. 2026-11-29T12:00:00.000Z.
std::string FormatTimestamp(absl::Time t);

// What the node enrolled with, as the health source checks privhelper against it.
struct EnrolledProvider {
  int64_t generation = 0;  // the enrolled generation
  std::string specification_digest;
  std::string installation_id;
  bool generation_management = false;
};

class ProbeHealthSource final : public HealthSource {
 public:
  // `on_probe`, `not_held_diagnostic` and `on_probe_failed` may be empty.
  ProbeHealthSource(ProviderProber* prober, HostMetricsSource* host, const Clock* clock,
                    EnrolledProvider enrolled,
                    std::function<void(const ProbeOutcome&)> on_probe = nullptr,
                    std::function<Diagnostic()> not_held_diagnostic = nullptr,
                    std::function<void(Diagnostic)> on_probe_failed = nullptr);
  void Collect(std::function<void(HealthReport)> done) override;

 private:
  HealthReport FromProbe(const absl::StatusOr<ProbeOutcome>& outcome);

  ProviderProber* prober_;
  HostMetricsSource* host_;
  const Clock* clock_;
  EnrolledProvider enrolled_;
  std::function<void(const ProbeOutcome&)> on_probe_;
  std::function<Diagnostic()> not_held_diagnostic_;
  std::function<void(Diagnostic)> on_probe_failed_;
  SandboxCounts last_counts_;  // the last counted values (0 before the first count)
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_HEALTH_PROBE_HEALTH_H_

// What privhelper asks of a provider, independent of any backend: the Docker implementation is
// DockerProvider (privhelper/docker/docker_provider.h); tests substitute fakes.
#ifndef SANDBOX_NODE_PRIVHELPER_PROVIDER_H_
#define SANDBOX_NODE_PRIVHELPER_PROVIDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/diagnostics.h"

namespace sn::privhelper {

// This installation's sandboxes as a complete, label-filtered inventory counts them.
struct SandboxCounts {
  int64_t active = 0;    // running compute
  int64_t retained = 0;  // compute stopped, state kept
};

struct ProbeResult {
  bool ready = false;
  std::optional<Diagnostic> diagnostic;  // set iff !ready
  // A stable, non-secret description of the backend (e.g. "docker/<Version> <Driver>
  // <CgroupDriver>"), "" when the backend did not answer.
  std::string fingerprint;
  // Set only when the inventory was complete and successful.
  std::optional<SandboxCounts> sandboxes;
};

class Provider {
 public:
  virtual ~Provider() = default;
  // The provider code reported to the agent, e.g. "docker".
  virtual std::string_view name() const = 0;
  // Probes the backend now (never cached) and counts this installation's sandboxes.
  // Thread-safe.
  virtual ProbeResult Probe() = 0;
  // The probe a repair ends with before its generation is READY again: Probe, and whatever a
  // provider checks only then (the microVM provider boots a guest again). Thread-safe.
  virtual ProbeResult ProbeForReadiness() { return Probe(); }
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_PROVIDER_H_

// The Docker provider's readiness probe: /_ping, /version, /info on the Engine API, classified
// into one diagnostic code (spec §7) from typed errors. Probe text, paths and daemon messages
// go to privhelper's log only; the result carries the code and the fingerprint.
#ifndef SANDBOX_NODE_PRIVHELPER_DOCKER_PROBE_H_
#define SANDBOX_NODE_PRIVHELPER_DOCKER_PROBE_H_

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/diagnostics.h"
#include "privhelper/docker/engine.h"
#include "privhelper/provider.h"

namespace sn::docker {

inline constexpr absl::Duration kDockerProbeTimeout = absl::Seconds(5);
inline constexpr size_t kMaxFingerprintBytes = 256;


// Classifies a failed Engine request (typed TransportFailure; anything untyped is
// provider_unavailable).
Diagnostic ClassifyTransportError(const absl::Status& s);

// Probes now (never cached). `timeout` bounds each of the three requests.
privhelper::ProbeResult ProbeDocker(docker::DockerEngine& engine, absl::Duration timeout = kDockerProbeTimeout);

}  // namespace sn::docker

#endif  // SANDBOX_NODE_PRIVHELPER_DOCKER_PROBE_H_

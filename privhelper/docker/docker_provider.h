// The Docker provider: readiness from the Engine API, and this installation's sandbox counts
// from a complete label-filtered inventory (inventory.h).
#ifndef SANDBOX_NODE_PRIVHELPER_DOCKER_DOCKER_PROVIDER_H_
#define SANDBOX_NODE_PRIVHELPER_DOCKER_DOCKER_PROVIDER_H_

#include <memory>
#include <string>
#include <utility>

#include "privhelper/docker/engine.h"
#include "privhelper/docker/inventory.h"
#include "privhelper/docker/probe.h"
#include "privhelper/provider.h"

namespace sn::docker {

class DockerProvider final : public privhelper::Provider {
 public:
  DockerProvider(std::unique_ptr<docker::DockerEngine> engine, std::string installation_id,
                 absl::Duration probe_timeout = kDockerProbeTimeout)
      : engine_(std::move(engine)),
        installation_id_(std::move(installation_id)),
        probe_timeout_(probe_timeout) {}

  std::string_view name() const override { return "docker"; }

  privhelper::ProbeResult Probe() override {
    privhelper::ProbeResult r = ProbeDocker(*engine_, probe_timeout_);
    if (!r.ready || installation_id_.empty()) return r;
    docker::RequestOptions o;
    o.timeout = probe_timeout_;
    o.max_response_bytes = size_t{32} << 20;
    absl::StatusOr<docker::Counts> n = docker::CountSandboxes(*engine_, installation_id_, o);
    if (n.ok()) r.sandboxes = privhelper::SandboxCounts{n->running, n->retained};
    return r;
  }

 private:
  const std::unique_ptr<docker::DockerEngine> engine_;
  const std::string installation_id_;
  const absl::Duration probe_timeout_;
};

}  // namespace sn::docker

#endif  // SANDBOX_NODE_PRIVHELPER_DOCKER_DOCKER_PROVIDER_H_

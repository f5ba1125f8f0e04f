// The Docker provider: readiness from the Engine API.
#ifndef SANDBOX_NODE_PRIVHELPER_DOCKER_DOCKER_PROVIDER_H_
#define SANDBOX_NODE_PRIVHELPER_DOCKER_DOCKER_PROVIDER_H_

#include <memory>
#include <utility>

#include "privhelper/docker/engine.h"
#include "privhelper/docker/probe.h"
#include "privhelper/provider.h"

namespace sn::privhelper {

class DockerProvider final : public Provider {
 public:
  explicit DockerProvider(std::unique_ptr<docker::DockerEngine> engine,
                          absl::Duration probe_timeout = kDockerProbeTimeout)
      : engine_(std::move(engine)), probe_timeout_(probe_timeout) {}

  std::string_view name() const override { return "docker"; }
  ProbeResult Probe() override { return ProbeDocker(*engine_, probe_timeout_); }

 private:
  const std::unique_ptr<docker::DockerEngine> engine_;
  const absl::Duration probe_timeout_;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_DOCKER_DOCKER_PROVIDER_H_

// What privhelper asks of a provider. The Docker implementation is DockerProvider
// (docker_provider.h); tests substitute fakes.
#ifndef SANDBOX_NODE_PRIVHELPER_PROVIDER_H_
#define SANDBOX_NODE_PRIVHELPER_PROVIDER_H_

#include <string_view>

#include "privhelper/docker_probe.h"

namespace sn::privhelper {

class Provider {
 public:
  virtual ~Provider() = default;
  // The provider code reported to the agent, e.g. "docker".
  virtual std::string_view name() const = 0;
  // Probes the backend now (never cached). Thread-safe.
  virtual ProbeResult Probe() = 0;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_PROVIDER_H_

#include "privhelper/native/docker/registration.h"

#include <string>

#include "privhelper/docker/beast_engine.h"
#include "privhelper/native/docker/docker_ops.h"

namespace sn::native::docker {

absl::StatusOr<std::unique_ptr<Provider>> MakeProvider(const ProviderContext& context) {
  std::string socket = "/var/run/docker.sock";
  if (auto it = context.options.find("docker_socket"); it != context.options.end()) {
    socket = it->second;
  }
  std::unique_ptr<Provider> provider = std::make_unique<DockerOperations>(
      std::make_unique<::sn::docker::BeastDockerEngine>(socket), context.installation_id,
      context.generation);
  return provider;
}

}  // namespace sn::native::docker

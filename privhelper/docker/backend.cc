#include "privhelper/docker/backend.h"

#include <memory>
#include <utility>

#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/docker_provider.h"
#include "privhelper/docker/importer.h"

namespace sn::docker {

absl::StatusOr<privhelper::Backend> MakeDockerBackend(const privhelper::Config& config,
                                                      const std::string& installation_id) {
  privhelper::Backend b;
  b.provider = std::make_unique<DockerProvider>(
      std::make_unique<BeastDockerEngine>(config.docker_socket), installation_id);
  b.importer = std::make_unique<DockerImporter>(
      std::make_unique<BeastDockerEngine>(config.docker_socket));
  b.helper_flags = {"--docker_socket=" + config.docker_socket};
  return b;
}

}  // namespace sn::docker

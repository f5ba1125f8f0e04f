// The Docker provider's Backend (privhelper/backend.h): the Engine API on the configured
// socket, one client for the probe and inventory, one for image import.
#ifndef SANDBOX_NODE_PRIVHELPER_DOCKER_BACKEND_H_
#define SANDBOX_NODE_PRIVHELPER_DOCKER_BACKEND_H_

#include <string>

#include "privhelper/backend.h"

namespace sn::docker {

absl::StatusOr<privhelper::Backend> MakeDockerBackend(const privhelper::Config& config,
                                                      const std::string& installation_id);

}  // namespace sn::docker

#endif  // SANDBOX_NODE_PRIVHELPER_DOCKER_BACKEND_H_

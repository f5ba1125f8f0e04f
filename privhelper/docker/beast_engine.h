// DockerEngine over the daemon's unix socket with Boost.Beast HTTP/1.1: one connection per
// request ("Connection: close"), one deadline for the whole exchange.
#ifndef SANDBOX_NODE_PRIVHELPER_DOCKER_BEAST_ENGINE_H_
#define SANDBOX_NODE_PRIVHELPER_DOCKER_BEAST_ENGINE_H_

#include <string>

#include "privhelper/docker/engine.h"

namespace sn::docker {

class BeastDockerEngine final : public DockerEngine {
 public:
  // `socket_path`: e.g. "/var/run/docker.sock". Nothing is opened until Request().
  explicit BeastDockerEngine(std::string socket_path);

  absl::StatusOr<HttpResponse> Request(std::string_view method, std::string_view target,
                                       std::string_view body,
                                       const RequestOptions& options) override;
  absl::StatusOr<HttpResponse> Hijack(std::string_view method, std::string_view target,
                                      std::string_view body, std::string_view input,
                                      bool close_input,
                                      const std::function<bool(std::string_view)>& sink,
                                      const RequestOptions& options) override;

 private:
  const std::string socket_path_;
};

}  // namespace sn::docker

#endif  // SANDBOX_NODE_PRIVHELPER_DOCKER_BEAST_ENGINE_H_

// privhelper's start-up configuration: `privhelper --config=FILE`, a JSON object with exactly
//   socket (absolute path), agent_uid (int), state_dir (absolute path), provider ("docker"),
//   docker_socket (optional absolute path, default /var/run/docker.sock).
// The installation identity is not configured: privhelper owns it (installation.h). The
// native helper executable is "native_helper" beside the privhelper executable.
// Unknown members, missing members and wrong types are start-up errors naming the member.
#ifndef SANDBOX_NODE_PRIVHELPER_CONFIG_H_
#define SANDBOX_NODE_PRIVHELPER_CONFIG_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sn::privhelper {

inline constexpr char kDefaultDockerSocket[] = "/var/run/docker.sock";
inline constexpr size_t kMaxConfigBytes = 64 * 1024;

struct Config {
  std::string socket;     // where privhelper listens (unix socket, created by privhelper)
  uid_t agent_uid = 0;    // the one uid whose connections are served
  std::string state_dir;  // privhelper's private state
  std::string provider;   // "docker"
  std::string docker_socket = kDefaultDockerSocket;
};

// Parses and validates the JSON text. InvalidArgument messages name the offending member.
absl::StatusOr<Config> ParseConfig(std::string_view json_text);

// Reads (at most kMaxConfigBytes) and parses `path`.
absl::StatusOr<Config> LoadConfig(const std::string& path);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_CONFIG_H_

// privhelper's start-up configuration: `privhelper --config=FILE`, a JSON object with exactly
//   socket (absolute path), agent_uid (int), state_dir (absolute path), provider ("docker"),
//   docker_socket (optional absolute path, default /var/run/docker.sock),
//   max_active (optional int 1..100000, default 16), max_retained (optional int 0..1000000,
//   default 64): the capacity privhelper enforces itself and reports through Probe,
//   helper_idle_seconds (optional int 1..86400, default 600): a native helper with no call for
//   this long is stopped (and started again on the next call),
//   max_generations (optional int 2..4096, default 64): generation records privhelper holds
//   (dropped generations' markers excluded); a preparation of a new generation beyond it is
//   refused storage_exhausted (store/generations.h),
//   release_public_key (required string): base64 of the 32-byte Ed25519 key of the console
//   releases privhelper trusts; privhelper verifies every release with this copy only.
// The installation identity is not configured: privhelper owns it (installation.h). The
// native helper executable is "native_helper" beside the privhelper executable.
// Unknown members, missing members and wrong types are start-up errors naming the member.
#ifndef SANDBOX_NODE_PRIVHELPER_CONFIG_H_
#define SANDBOX_NODE_PRIVHELPER_CONFIG_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sn::privhelper {

inline constexpr char kDefaultDockerSocket[] = "/var/run/docker.sock";
inline constexpr size_t kMaxConfigBytes = 64 * 1024;

inline constexpr int64_t kDefaultMaxActive = 16;
inline constexpr int64_t kDefaultMaxRetained = 64;
inline constexpr int64_t kDefaultHelperIdleSeconds = 600;
inline constexpr int64_t kMaxHelperIdleSeconds = 86400;
inline constexpr int64_t kDefaultMaxGenerations = 64;
inline constexpr int64_t kMinMaxGenerations = 2;
inline constexpr int64_t kMaxMaxGenerations = 4096;

struct Config {
  std::string socket;     // where privhelper listens (unix socket, created by privhelper)
  uid_t agent_uid = 0;    // the one uid whose connections are served
  std::string state_dir;  // privhelper's private state
  std::string provider;   // "docker"
  std::string docker_socket = kDefaultDockerSocket;
  int64_t max_active = kDefaultMaxActive;
  int64_t max_retained = kDefaultMaxRetained;
  int64_t helper_idle_seconds = kDefaultHelperIdleSeconds;
  int64_t max_generations = kDefaultMaxGenerations;
  std::string release_public_key;  // base64, checked at start-up (a valid Ed25519 key)
};

// Parses and validates the JSON text with the durable records' strict reader
// (common/json/record.h): one JSON object of at most kMaxConfigBytes, no member named twice,
// no unknown member, every member of its type. InvalidArgument messages name the offending
// member.
absl::StatusOr<Config> ParseConfig(std::string_view json_text);

// Reads (at most kMaxConfigBytes) and parses `path`. The file is privhelper's trust anchor:
// refused (FailedPrecondition naming the file and the reason) unless it is a regular file,
// reached without following a symbolic link through directories only root can change, owned
// by root (privhelper's euid) and not writable by group or others (store/safe_dir.h).
absl::StatusOr<Config> LoadConfig(const std::string& path);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_CONFIG_H_

// privhelper's server: the gRPC service (proto/privhelper.proto) behind its own accept loop
// (listener.h) and the monitor's dispatch table (monitor.h).
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_SERVER_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/provider.h"

namespace sn::privhelper {

// Upper bound on one gRPC message either way (sized for later file transfer: 48 MiB of
// content plus framing).
inline constexpr int kMaxMessageBytes = 80 * 1024 * 1024;

struct ServerOptions {
  std::string socket_path;
  uid_t agent_uid = 0;
  // Runs Execute calls; null when this privhelper has no installation identity (Execute then
  // answers FAILED_PRECONDITION).
  std::shared_ptr<HelperManager> helpers;
  // The installation identity privhelper owns (installation.h); Probe reports it.
  std::string installation_id;
};

class PrivHelperServer {
 public:
  // Creates the socket, starts gRPC and the accept loop, and enters the serving state.
  // REQUIRES: the socket's parent directory exists.
  static absl::StatusOr<std::unique_ptr<PrivHelperServer>> Start(
      const ServerOptions& options, std::unique_ptr<Provider> provider);
  ~PrivHelperServer();

  // Stops accepting, refuses new calls, and shuts gRPC down (in-flight calls get `grace`).
  // Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

 private:
  struct Impl;
  explicit PrivHelperServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_SERVER_H_

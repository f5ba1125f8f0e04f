// privhelper's own accept loop on its unix socket. gRPC 1.51 does not expose peer credentials,
// so privhelper accepts connections itself, checks SO_PEERCRED, and hands admitted sockets to
// gRPC (grpc::AddInsecureChannelFromFd). Refused peers are logged and closed.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_LISTENER_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_LISTENER_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "privhelper/rpc/peer.h"

namespace sn::privhelper {

class Listener {
 public:
  // Creates the listening socket at `path`: a stale entry is unlinked only if it is a socket
  // (anything else is an error), the socket is bound with a restrictive umask, then set to
  // mode 0660 and owner <euid>:<primary gid of agent_uid> (root:<agent's group> in production).
  // REQUIRES: the parent directory exists; called before other threads create files (umask).
  static absl::StatusOr<std::unique_ptr<Listener>> Create(const std::string& path,
                                                          uid_t agent_uid);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Starts the accept thread. Each connection whose peer uid is allowed is recorded in
  // `peers` and passed (non-blocking, close-on-exec; ownership transferred) to `on_admitted`.
  // REQUIRES: `peers` outlives Stop(); called once.
  void Start(AdmittedPeers* peers, std::function<void(int fd)> on_admitted);

  // Stops accepting, joins the thread, closes and unlinks the socket. Idempotent.
  void Stop();

  const std::string& path() const { return path_; }

 private:
  Listener(std::string path, int listen_fd, int wake_fd);
  void Loop(AdmittedPeers* peers, const std::function<void(int)>& on_admitted);

  const std::string path_;
  int listen_fd_;
  int wake_fd_;  // eventfd; written by Stop()
  std::thread thread_;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_LISTENER_H_

// Peer credentials of unix-socket connections (SO_PEERCRED) and the registry of connections
// privhelper admitted.
//
// Two checks guard every call (fail-closed):
//  1. At accept (Listener): the connecting process's SO_PEERCRED uid must equal the configured
//     agent uid; refused connections are logged and closed before gRPC sees a byte.
//  2. Per RPC (Monitor): gRPC reports an fd channel's peer as "fd:<N>". The handler parses N,
//     requires that N is in this registry with the socket inode recorded at admission (an fd
//     number reused by another socket has another inode), and re-reads SO_PEERCRED on it.
//     Anything unparseable, unknown or mismatched is PERMISSION_DENIED.
//
// The registry also bounds how many admitted connections are open at once
// (kMaxAdmittedConnections): gRPC owns and closes admitted fds without telling privhelper, so
// each Admit first purges entries whose fd no longer refers to the admitted socket.
//
// Thread-safe: the accept thread calls Admit; gRPC threads call Verify and Disconnect.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_PEER_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_PEER_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace sn::privhelper {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// SO_PEERCRED of a connected unix socket.
absl::StatusOr<PeerCred> GetPeerCred(int fd);

// Whether a peer with `cred` may be served when configured for `agent_uid`. Exactly one uid
// is served: root is refused unless agent_uid is 0.
bool PeerAllowed(const PeerCred& cred, uid_t agent_uid);

// "fd:<N>" -> N; nullopt for anything else.
std::optional<int> ParseFdPeer(std::string_view grpc_peer);

// Admitted agent connections open at once. The honest agent holds two long-lived channels
// (executor and prober, agent/cli/run.cc); `agent enroll` and one-shot tools add one each for
// their lifetime, and a reconnecting channel may briefly overlap its closing predecessor.
// gRPC multiplexes every call over a channel's one connection, so concurrency needs no more
// connections. 16 is several times that honest peak, and bounds what a hostile agent can
// hold: 16 descriptors and gRPC transports, whatever it does.
inline constexpr size_t kMaxAdmittedConnections = 16;

class AdmittedPeers {
 public:
  explicit AdmittedPeers(uid_t agent_uid, size_t max_connections = kMaxAdmittedConnections)
      : agent_uid_(agent_uid), max_connections_(max_connections) {}

  uid_t agent_uid() const { return agent_uid_; }
  size_t max_connections() const { return max_connections_; }

  // Records `fd` (an accepted socket whose peer was allowed) with its current inode.
  // ResourceExhausted (nothing recorded) when `max_connections` admitted connections are
  // still open; the caller then closes `fd`.
  absl::Status Admit(int fd) ABSL_LOCKS_EXCLUDED(mu_);

  // Admitted connections still open (after purging closed ones).
  size_t OpenCount() ABSL_LOCKS_EXCLUDED(mu_);

  // OK iff `grpc_peer` names an fd admitted here whose socket is still the admitted one and
  // whose SO_PEERCRED uid is still allowed. PermissionDenied otherwise.
  absl::Status Verify(std::string_view grpc_peer) const ABSL_LOCKS_EXCLUDED(mu_);

  // Drops the connection `grpc_peer` names (a permit-table violation): shuts its socket down
  // both ways, if it is still the admitted one, so gRPC fails every call on it and closes it.
  // The fd itself stays gRPC's to close. Returns whether a connection was shut down.
  bool Disconnect(std::string_view grpc_peer) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Drops entries whose fd no longer refers to the admitted socket (gRPC closed it).
  void PurgeClosed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uid_t agent_uid_;
  const size_t max_connections_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, ino_t> admitted_ ABSL_GUARDED_BY(mu_);  // fd -> socket inode
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_PEER_H_

// privhelper's own accept loop on its unix socket. gRPC 1.51 does not expose peer credentials,
// so privhelper accepts connections itself, checks SO_PEERCRED, and hands admitted sockets to
// gRPC (grpc::AddInsecureChannelFromFd). Refused peers are closed before gRPC sees a byte.
//
// The socket is created without following any path, so the agent can neither swap nor
// pre-create it:
//  - its directory is opened from "/" with no-follow calls and must be trusted
//    (safe_dir.h: root-owned, not writable by group or others, no symbolic link on the way;
//    it must also not be set-group-ID and carry no default ACL, either of which would change
//    the socket's group or mode); anything else refuses start-up naming the directory;
//  - a stale entry at the name is removed only when fstatat(AT_SYMLINK_NOFOLLOW) says it is a
//    socket; any other file (a symbolic link included) refuses start-up and is left as it is;
//  - the socket is born with its final owner and mode: bind() through the opened directory
//    ("/proc/self/fd/<dirfd>/<name>") on a short-lived thread whose umask is 0117 and whose
//    file-system gid is the agent's primary group, so it is created root:<agent group> 0660;
//    then fstatat(AT_SYMLINK_NOFOLLOW) checks exactly that. No chown or chmod exists.
//    Production layout: /run/sandbox-node root:root 0755, socket root:<agent group> 0660.
//
// Accepting (out of descriptors it neither spins nor floods the log; connections are bounded):
//  - a reserve descriptor is held; when accept() fails with EMFILE/ENFILE the reserve is
//    closed, the pending connections are accepted and closed (their clients see the refusal
//    at once), the reserve is taken back, and the loop pauses 50 ms, doubling up to 1 s,
//    before it accepts again: it never spins;
//  - at most AdmittedPeers::max_connections() admitted connections are open at once; others
//    are closed;
//  - every kind of refusal is logged at most once per 10 s, with the count since the last line.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_LISTENER_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_LISTENER_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "privhelper/rpc/peer.h"
#include "privhelper/store/safe_dir.h"

namespace sn::privhelper {

// Accept pacing (see above).
inline constexpr absl::Duration kAcceptMinPause = absl::Milliseconds(50);
inline constexpr absl::Duration kAcceptMaxPause = absl::Seconds(1);
inline constexpr absl::Duration kRefusalLogInterval = absl::Seconds(10);
inline constexpr int kListenBacklog = 64;

class Listener {
 public:
  // Creates the listening socket at the absolute `path` as described above, group-owned by
  // the primary group of `agent_uid`. FailedPrecondition (naming the directory or file and the
  // reason) for an untrusted directory or a non-socket at `path`; NotFound when the directory
  // does not exist. Needs CAP_SETGID for setfsgid() unless the agent's group is the caller's
  // real, effective or saved gid (privhelper as root: it needs CAP_SETGID).
  // Callable from any thread; the caller's umask and credentials are unchanged (the umask is
  // made private to the creating thread with unshare(CLONE_FS); where that is refused, e.g.
  // by a seccomp filter, it is set process-wide around bind() and restored).
  static absl::StatusOr<std::unique_ptr<Listener>> Create(const std::string& path,
                                                          uid_t agent_uid);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Starts the accept thread. Each connection whose peer uid is allowed and that fits the
  // connection bound is recorded in `peers` and passed (non-blocking, close-on-exec;
  // ownership transferred) to `on_admitted`, on the accept thread.
  // REQUIRES: `peers` outlives Stop(); called once.
  void Start(AdmittedPeers* peers, std::function<void(int fd)> on_admitted);

  // Stops accepting, joins the thread, closes the socket and removes its directory entry if
  // it is still the socket this Listener created. Idempotent.
  void Stop();

  const std::string& path() const { return path_; }

 private:
  Listener(std::string path, OwnedFd dir, std::string name, ino_t inode, int listen_fd,
           int wake_fd, int reserve_fd);
  void Loop(AdmittedPeers* peers, const std::function<void(int)>& on_admitted);
  // Out of descriptors: frees the reserve, accepts and closes what is pending, takes the
  // reserve back. Returns the number of connections closed.
  uint64_t ShedPending();

  const std::string path_;
  const OwnedFd dir_;      // O_PATH descriptor of the socket's directory
  const std::string name_;  // the socket's name in dir_
  const ino_t inode_;       // the socket file's inode, to remove only our own at Stop()
  int listen_fd_;
  int wake_fd_;     // eventfd; written by Stop()
  int reserve_fd_;  // eventfd held to be given up when the process runs out of descriptors
  std::thread thread_;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_LISTENER_H_

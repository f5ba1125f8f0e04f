#include "privhelper/rpc/peer.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"

namespace sn::privhelper {

absl::StatusOr<PeerCred> GetPeerCred(int fd) {
  struct ucred uc {};
  socklen_t len = sizeof uc;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0) {
    return ErrnoStatus(errno, "getsockopt(SO_PEERCRED)");
  }
  if (len != sizeof uc) return absl::InternalError("SO_PEERCRED: short answer");
  return PeerCred{uc.pid, uc.uid, uc.gid};
}

bool PeerAllowed(const PeerCred& cred, uid_t agent_uid) { return cred.uid == agent_uid; }

std::optional<int> ParseFdPeer(std::string_view grpc_peer) {
  constexpr std::string_view kPrefix = "fd:";
  if (grpc_peer.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view digits = grpc_peer.substr(kPrefix.size());
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  int fd = -1;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), fd);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || fd < 0) return std::nullopt;
  return fd;
}

void AdmittedPeers::PurgeClosed() {
  for (auto it = admitted_.begin(); it != admitted_.end();) {
    struct stat st {};
    bool same = fstat(it->first, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == it->second;
    if (same) {
      ++it;
    } else {
      admitted_.erase(it++);
    }
  }
}

absl::Status AdmittedPeers::Admit(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return ErrnoStatus(errno, "fstat(admitted socket)");
  if (!S_ISSOCK(st.st_mode)) return absl::FailedPreconditionError("admitted fd is not a socket");
  absl::MutexLock lock(&mu_);
  // `fd` itself may still carry the entry of a closed connection whose number it reuses: the
  // purge drops that entry (its inode differs), so it is not counted.
  PurgeClosed();
  if (admitted_.size() >= max_connections_) {
    return absl::ResourceExhaustedError(
        absl::StrCat(admitted_.size(), " admitted connections open (at most ", max_connections_,
                     ")"));
  }
  admitted_[fd] = st.st_ino;
  return absl::OkStatus();
}

size_t AdmittedPeers::OpenCount() {
  absl::MutexLock lock(&mu_);
  PurgeClosed();
  return admitted_.size();
}

absl::Status AdmittedPeers::Verify(std::string_view grpc_peer) const {
  std::optional<int> fd = ParseFdPeer(grpc_peer);
  if (!fd.has_value()) return absl::PermissionDeniedError("peer is not an admitted connection");
  ino_t want;
  {
    absl::MutexLock lock(&mu_);
    auto it = admitted_.find(*fd);
    if (it == admitted_.end()) return absl::PermissionDeniedError("peer fd was never admitted");
    want = it->second;
  }
  struct stat st {};
  if (fstat(*fd, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_ino != want) {
    return absl::PermissionDeniedError("peer fd no longer the admitted socket");
  }
  absl::StatusOr<PeerCred> cred = GetPeerCred(*fd);
  if (!cred.ok()) return absl::PermissionDeniedError("peer credentials unavailable");
  if (!PeerAllowed(*cred, agent_uid_)) {
    return absl::PermissionDeniedError(absl::StrCat("peer uid ", cred->uid, " not served"));
  }
  return absl::OkStatus();
}

bool AdmittedPeers::Disconnect(std::string_view grpc_peer) {
  std::optional<int> fd = ParseFdPeer(grpc_peer);
  if (!fd.has_value()) return false;
  absl::MutexLock lock(&mu_);
  auto it = admitted_.find(*fd);
  if (it == admitted_.end()) return false;
  struct stat st {};
  if (fstat(*fd, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_ino != it->second) return false;
  admitted_.erase(it);
  return shutdown(*fd, SHUT_RDWR) == 0;
}

}  // namespace sn::privhelper

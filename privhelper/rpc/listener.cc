#include "privhelper/rpc/listener.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/log.h"

namespace sn::privhelper {
namespace {

absl::StatusOr<gid_t> PrimaryGid(uid_t uid) {
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* result = nullptr;
  int rc = getpwuid_r(uid, &pw, buf.data(), buf.size(), &result);
  if (rc != 0) return ErrnoStatus(rc, "getpwuid_r(agent_uid)");
  if (result == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("agent_uid ", uid, " has no passwd entry"));
  }
  return pw.pw_gid;
}

absl::Status RemoveStaleSocket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(errno, absl::StrCat("lstat ", path));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("socket path ", path, " exists and is not a socket; refusing to remove it"));
  }
  if (unlink(path.c_str()) != 0) return ErrnoStatus(errno, absl::StrCat("unlink ", path));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Listener>> Listener::Create(const std::string& path,
                                                           uid_t agent_uid) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return absl::InvalidArgumentError("socket path empty or too long");
  }
  absl::StatusOr<gid_t> gid = PrimaryGid(agent_uid);
  if (!gid.ok()) return gid.status();
  absl::Status s = RemoveStaleSocket(path);
  if (!s.ok()) return s;

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket(AF_UNIX)");
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.data(), path.size());
  mode_t old_mask = umask(0177);  // the socket file is born 0600 ...
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int bind_errno = errno;
  umask(old_mask);
  if (rc != 0) {
    close(fd);
    return ErrnoStatus(bind_errno, absl::StrCat("bind ", path));
  }
  // ... and gets the agent's group before it is widened to 0660.
  if (chown(path.c_str(), geteuid(), *gid) != 0 || chmod(path.c_str(), 0660) != 0) {
    absl::Status err = ErrnoStatus(errno, absl::StrCat("chown/chmod ", path));
    close(fd);
    unlink(path.c_str());
    return err;
  }
  if (listen(fd, 64) != 0) {
    absl::Status err = ErrnoStatus(errno, "listen");
    close(fd);
    unlink(path.c_str());
    return err;
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    absl::Status err = ErrnoStatus(errno, "eventfd");
    close(fd);
    unlink(path.c_str());
    return err;
  }
  return std::unique_ptr<Listener>(new Listener(path, fd, wake));
}

Listener::Listener(std::string path, int listen_fd, int wake_fd)
    : path_(std::move(path)), listen_fd_(listen_fd), wake_fd_(wake_fd) {}

Listener::~Listener() { Stop(); }

void Listener::Start(AdmittedPeers* peers, std::function<void(int fd)> on_admitted) {
  thread_ = std::thread([this, peers, cb = std::move(on_admitted)] { Loop(peers, cb); });
}

void Listener::Stop() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t unused = write(wake_fd_, &one, sizeof one);
    (void)unused;
    thread_.join();
  }
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    unlink(path_.c_str());
  }
  if (wake_fd_ >= 0) {
    close(wake_fd_);
    wake_fd_ = -1;
  }
}

void Listener::Loop(AdmittedPeers* peers, const std::function<void(int)>& on_admitted) {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int n = poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      LogError("privhelper accept loop: poll failed", {{"errno", errno}});
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
        LogWarning("privhelper accept failed", {{"errno", errno}});
      }
      continue;
    }
    absl::StatusOr<PeerCred> cred = GetPeerCred(fd);
    if (!cred.ok()) {
      LogWarning("refused connection: no peer credentials", {{"error", cred.status().ToString()}});
      close(fd);
      continue;
    }
    if (!PeerAllowed(*cred, peers->agent_uid())) {
      LogWarning("refused connection from a peer that is not the agent",
                 {{"peer_uid", static_cast<uint64_t>(cred->uid)},
                  {"peer_pid", static_cast<int64_t>(cred->pid)}});
      close(fd);
      continue;
    }
    absl::Status s = peers->Admit(fd);
    if (!s.ok()) {
      LogWarning("refused connection: cannot record it", {{"error", s.ToString()}});
      close(fd);
      continue;
    }
    LogDebug("admitted agent connection", {{"peer_pid", static_cast<int64_t>(cred->pid)}});
    on_admitted(fd);
  }
}

}  // namespace sn::privhelper

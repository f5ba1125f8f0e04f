#include "privhelper/rpc/listener.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/log.h"
#include "privhelper/rpc/throttle.h"

namespace sn::privhelper {
namespace {

constexpr mode_t kSocketMode = 0660;
constexpr mode_t kSocketUmask = 0117;  // 0777 & ~0117 == 0660
static_assert((0777 & ~kSocketUmask) == kSocketMode);

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

std::string Mode(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

// Removes a stale socket at `name`; refuses anything else that is there.
absl::Status RemoveStaleSocket(int dirfd, const std::string& name, const std::string& path) {
  struct stat st {};
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(errno, absl::StrCat("stat ", path));
  }
  if (!S_ISSOCK(st.st_mode)) {
    const char* kind = S_ISLNK(st.st_mode)   ? "a symbolic link"
                       : S_ISREG(st.st_mode) ? "a regular file"
                       : S_ISDIR(st.st_mode) ? "a directory"
                                             : "another kind of file";
    return absl::FailedPreconditionError(absl::StrCat("socket path ", path, " exists and is ",
                                                      kind,
                                                      ", not a socket; refusing to touch it"));
  }
  if (unlinkat(dirfd, name.c_str(), 0) != 0) {
    return ErrnoStatus(errno, absl::StrCat("unlink stale socket ", path));
  }
  return absl::OkStatus();
}

// The socket's directory must not decide its group (set-group-ID) or mode (default ACL).
absl::Status CheckDirectoryKeepsModeAndGroup(int dirfd, const std::string& dir) {
  struct stat st {};
  if (fstat(dirfd, &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat ", dir));
  if ((st.st_mode & S_ISGID) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "socket directory ", dir, ": is set-group-ID (mode ", Mode(st.st_mode),
        "), which would decide the socket's group"));
  }
  std::string link = absl::StrCat("/proc/self/fd/", dirfd);
  if (getxattr(link.c_str(), "system.posix_acl_default", nullptr, 0) >= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "socket directory ", dir, ": has a default ACL, which would decide the socket's mode"));
  }
  if (errno != ENODATA && errno != EOPNOTSUPP) {
    return ErrnoStatus(errno, absl::StrCat("read the default ACL of ", dir, " (through ", link,
                                           "; is /proc mounted?)"));
  }
  return absl::OkStatus();
}

// Binds `sock` to `name` in the directory `dirfd` with the current thread's umask 0117 and
// file-system gid `gid`. Runs on a thread of its own (BindAsAgentGroup), so the credential
// change dies with that thread.
absl::Status BindOnThisThread(int sock, int dirfd, const std::string& name, gid_t gid) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string target = absl::StrCat("/proc/self/fd/", dirfd, "/", name);
  if (target.size() >= sizeof addr.sun_path) {
    return absl::InvalidArgumentError(absl::StrCat("socket name \"", name, "\" is too long (at most ",
                                                   sizeof addr.sun_path - 1 - (target.size() - name.size()),
                                                   " bytes)"));
  }
  memcpy(addr.sun_path, target.data(), target.size());
  // A private umask (fs_struct) for this thread; where unshare() is filtered the umask is set
  // process-wide below and restored right after bind().
  if (unshare(CLONE_FS) != 0) {
    LogDebug("socket umask set process-wide: unshare(CLONE_FS) refused", {{"errno", errno}});
  }
  // setfsgid() answers the previous value whether or not it succeeded: ask twice.
  setfsgid(gid);
  if (static_cast<gid_t>(setfsgid(gid)) != gid) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create the socket with the agent's group ", gid,
        ": setfsgid refused (privhelper needs CAP_SETGID)"));
  }
  mode_t old_mask = umask(kSocketUmask);
  int rc = bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int bind_errno = errno;
  umask(old_mask);
  if (rc != 0) return ErrnoStatus(bind_errno, absl::StrCat("bind ", name));
  return absl::OkStatus();
}

absl::Status BindAsAgentGroup(int sock, int dirfd, const std::string& name, gid_t gid) {
  absl::Status result;
  std::thread t([&] { result = BindOnThisThread(sock, dirfd, name, gid); });
  t.join();
  return result;
}

// The socket must be exactly what was asked for: a socket, <euid>:<gid>, 0660.
absl::StatusOr<ino_t> VerifyBornSocket(int dirfd, const std::string& name, const std::string& path,
                                       gid_t gid) {
  struct stat st {};
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoStatus(errno, absl::StrCat("stat new socket ", path));
  }
  if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid() || st.st_gid != gid ||
      (st.st_mode & 07777) != kSocketMode) {
    return absl::InternalError(absl::StrCat(
        "new socket ", path, " is uid ", st.st_uid, " gid ", st.st_gid, " mode ",
        Mode(st.st_mode), S_ISSOCK(st.st_mode) ? "" : " (not a socket)", "; expected uid ",
        geteuid(), " gid ", gid, " mode ", Mode(kSocketMode)));
  }
  return st.st_ino;
}

const char* ErrnoName(int err) {
  switch (err) {
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    default: return "other";
  }
}

// The accept loop's refusal logs, each rate-limited on its own.
struct RefusalLogs {
  LogRateLimiter no_fds{kRefusalLogInterval};
  LogRateLimiter bound{kRefusalLogInterval};
  LogRateLimiter stranger{kRefusalLogInterval};
  LogRateLimiter error{kRefusalLogInterval};

  // What the rate limits held back, so the totals are complete.
  void LogSuppressed() {
    for (auto [limiter, what] : {std::pair{&no_fds, "out of file descriptors"},
                                 std::pair{&bound, "too many open connections"},
                                 std::pair{&stranger, "peer is not the agent"},
                                 std::pair{&error, "accept errors"}}) {
      if (uint64_t count = limiter->TakeSuppressed(); count > 0) {
        LogWarning("refusals not yet logged at shutdown", {{"reason", what}, {"count", count}});
      }
    }
  }
};

// Admits the accepted connection `fd` when its peer is the agent and the bound has room, and
// hands it to `on_admitted`; otherwise closes it and logs the refusal.
void AdmitOrRefuse(int fd, AdmittedPeers* peers, RefusalLogs& logs, const Clock& clock,
                   const std::function<void(int)>& on_admitted) {
  absl::StatusOr<PeerCred> cred = GetPeerCred(fd);
  if (!cred.ok() || !PeerAllowed(*cred, peers->agent_uid())) {
    close(fd);
    if (auto count = logs.stranger.Add(clock.Monotonic())) {
      LogWarning("refused connection from a peer that is not the agent",
                 {{"peer_uid", cred.ok() ? static_cast<int64_t>(cred->uid) : int64_t{-1}},
                  {"peer_pid", cred.ok() ? static_cast<int64_t>(cred->pid) : int64_t{-1}},
                  {"refused", *count}});
    }
    return;
  }
  absl::Status s = peers->Admit(fd);
  if (!s.ok()) {
    close(fd);
    if (absl::IsResourceExhausted(s)) {
      if (auto count = logs.bound.Add(clock.Monotonic())) {
        LogWarning("refused agent connection: too many open connections",
                   {{"max_connections", static_cast<uint64_t>(peers->max_connections())},
                    {"refused", *count}});
      }
    } else if (auto count = logs.error.Add(clock.Monotonic())) {
      LogWarning("refused connection: cannot record it",
                 {{"error", s.ToString()}, {"count", *count}});
    }
    return;
  }
  LogDebug("admitted agent connection", {{"peer_pid", static_cast<int64_t>(cred->pid)}});
  on_admitted(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Listener>> Listener::Create(const std::string& path,
                                                           uid_t agent_uid) {
  sockaddr_un probe{};
  if (path.empty() || path.size() >= sizeof probe.sun_path) {
    return absl::InvalidArgumentError("socket path empty or too long");
  }
  absl::StatusOr<std::pair<std::string, std::string>> split = SplitParent(path);
  if (!split.ok()) return split.status();
  const std::string& dir_path = split->first;
  const std::string& name = split->second;
  absl::StatusOr<gid_t> gid = PrimaryGid(agent_uid);
  if (!gid.ok()) return gid.status();

  absl::StatusOr<OwnedFd> dir = OpenTrustedDirectory(dir_path);
  if (!dir.ok()) {
    return absl::Status(dir.status().code(),
                        absl::StrCat("socket directory: ", dir.status().message()));
  }
  absl::Status s = CheckDirectoryKeepsModeAndGroup(dir->get(), dir_path);
  if (!s.ok()) return s;
  // The socket is born under a staging name and renamed into place only once it listens: a
  // client that sees `name` can connect (bind() creates the file before listen() accepts).
  const std::string staging = name + "~";
  const std::string staging_path = path + "~";
  s = RemoveStaleSocket(dir->get(), name, path);
  if (s.ok()) s = RemoveStaleSocket(dir->get(), staging, staging_path);
  if (!s.ok()) return s;

  OwnedFd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock.valid()) return ErrnoStatus(errno, "socket(AF_UNIX)");
  s = BindAsAgentGroup(sock.get(), dir->get(), staging, *gid);
  if (!s.ok()) return s;
  // From here on the staging name is ours: remove it on any failure.
  auto fail = [&](absl::Status err) {
    unlinkat(dir->get(), staging.c_str(), 0);
    return err;
  };
  absl::StatusOr<ino_t> inode = VerifyBornSocket(dir->get(), staging, staging_path, *gid);
  if (!inode.ok()) return fail(inode.status());
  if (listen(sock.get(), kListenBacklog) != 0) return fail(ErrnoStatus(errno, "listen"));
  OwnedFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  OwnedFd reserve(eventfd(0, EFD_CLOEXEC));
  if (!wake.valid() || !reserve.valid()) return fail(ErrnoStatus(errno, "eventfd"));
  if (renameat(dir->get(), staging.c_str(), dir->get(), name.c_str()) != 0) {
    return fail(ErrnoStatus(errno, absl::StrCat("rename ", staging_path, " to ", path)));
  }
  return std::unique_ptr<Listener>(new Listener(path, std::move(*dir), name, *inode,
                                                sock.release(), wake.release(),
                                                reserve.release()));
}

Listener::Listener(std::string path, OwnedFd dir, std::string name, ino_t inode, int listen_fd,
                   int wake_fd, int reserve_fd)
    : path_(std::move(path)),
      dir_(std::move(dir)),
      name_(std::move(name)),
      inode_(inode),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      reserve_fd_(reserve_fd) {}

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
    struct stat st {};
    if (fstatat(dir_.get(), name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISSOCK(st.st_mode) && st.st_ino == inode_) {
      unlinkat(dir_.get(), name_.c_str(), 0);
    }
  }
  for (int* fd : {&wake_fd_, &reserve_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

uint64_t Listener::ShedPending() {
  if (reserve_fd_ >= 0) {
    close(reserve_fd_);
    reserve_fd_ = -1;
  }
  uint64_t closed = 0;
  // Bounded by the backlog: connections arriving meanwhile wait for the next round.
  for (int i = 0; i <= kListenBacklog; ++i) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    close(fd);
    ++closed;
  }
  // May fail when another thread took the freed slot; the next shortage tries again.
  reserve_fd_ = eventfd(0, EFD_CLOEXEC);
  return closed;
}

void Listener::Loop(AdmittedPeers* peers, const std::function<void(int)>& on_admitted) {
  const Clock& clock = *SystemClock::Get();
  Backoff backoff(kAcceptMinPause, kAcceptMaxPause);
  RefusalLogs logs;
  absl::Duration pause = absl::ZeroDuration();
  for (;;) {
    // While paused only Stop() is watched, for at most `pause`.
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    const bool paused = pause > absl::ZeroDuration();
    int n = poll(fds, paused ? 1 : 2, paused ? static_cast<int>(absl::ToInt64Milliseconds(pause)) : -1);
    if (n < 0 && errno != EINTR) {
      if (auto count = logs.error.Add(clock.Monotonic())) {
        LogError("privhelper accept loop: poll failed", {{"errno", errno}, {"count", *count}});
      }
      pause = backoff.Next();
      continue;
    }
    if (n < 0) continue;
    if (fds[0].revents != 0) break;
    if (paused) {
      pause = absl::ZeroDuration();
      continue;
    }
    if ((fds[1].revents & POLLIN) == 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EINTR || err == ECONNABORTED) continue;
      pause = backoff.Next();
      if (err == EMFILE || err == ENFILE) {
        uint64_t closed = ShedPending();
        if (auto count = logs.no_fds.Add(clock.Monotonic(), closed)) {
          LogWarning("refusing agent connections: privhelper is out of file descriptors",
                     {{"errno", ErrnoName(err)},
                      {"connections_closed", *count},
                      {"pause_ms", absl::ToInt64Milliseconds(pause)}});
        }
      } else if (auto count = logs.error.Add(clock.Monotonic())) {
        LogWarning("privhelper accept failed", {{"errno", err}, {"count", *count}});
      }
      continue;
    }
    backoff.Reset();
    AdmitOrRefuse(fd, peers, logs, clock, on_admitted);
  }
  logs.LogSuppressed();
}

}  // namespace sn::privhelper

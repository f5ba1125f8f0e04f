// Opening the directories and files privhelper trusts without ever following a path that
// someone other than root could change (the agent must not redirect privhelper's socket or
// state through a path it controls).
//
// A path is trusted when root controls every step of it. OpenTrustedDirectory walks from "/"
// one component at a time with openat(O_PATH | O_DIRECTORY | O_NOFOLLOW), so no symbolic
// link is ever followed and each step is checked on the descriptor just opened (fstat), never
// re-resolved by name:
//  - every component, "/" included, is a directory owned by a trusted owner (below);
//  - every ancestor is not writable by group or others, except a sticky directory owned by a
//    trusted owner (such as /tmp): others may add entries there but cannot rename or remove
//    ours, and the next component must itself be trusted-owned, so they cannot plant it;
//  - the directory itself is not writable by group or others (sticky or not): only root may
//    add, rename or remove its entries, so a name checked in it stays checked.
// "." and ".." components are refused; empty components ("//") are skipped.
//
// Trusted owners: root, and privhelper's own effective uid (the same in production, where
// privhelper runs as root; a test run as an ordinary user trusts itself and root).
//
// Refusals are FailedPrecondition naming the offending path and the reason; a missing
// component is NotFound. Thread-safe (no shared state); callable from any thread.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_SAFE_DIR_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_SAFE_DIR_H_

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace sn::privhelper {

// An owned file descriptor, closed on destruction.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd() { reset(); }
  OwnedFd(OwnedFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
};

// Whether `uid` may own a directory or file privhelper trusts: root or the effective uid.
bool IsTrustedOwner(uid_t uid);

// "/a/b/c" -> {"/a/b", "c"}; "/c" -> {"/", "c"}. InvalidArgument unless `path` is absolute,
// has no NUL, and its last component is a plain name (not empty, ".", or "..").
absl::StatusOr<std::pair<std::string, std::string>> SplitParent(std::string_view path);

// Opens the absolute directory `dir` as described above. Returns an O_PATH directory
// descriptor (close-on-exec) for *at() calls.
absl::StatusOr<OwnedFd> OpenTrustedDirectory(std::string_view dir);

// Opens the regular file `path` read-only: its directory as OpenTrustedDirectory, the file
// with O_NOFOLLOW | O_NONBLOCK (a FIFO cannot block the open) and close-on-exec. Refused
// unless it is a regular file, owned by a trusted owner and not writable by group or others.
absl::StatusOr<OwnedFd> OpenTrustedFile(std::string_view path);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_SAFE_DIR_H_

#include "privhelper/store/safe_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"

namespace sn::privhelper {
namespace {

absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Refuse(std::string_view path, std::string_view reason) {
  return absl::FailedPreconditionError(absl::StrCat(AbslView(path), ": ", AbslView(reason)));
}

std::string Mode(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

const char* Kind(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file or directory";
}

bool WritableByOthers(mode_t mode) { return (mode & (S_IWGRP | S_IWOTH)) != 0; }

// Explains why `name` in `dirfd` could not be opened as a directory without following it.
absl::Status OpenFailure(int dirfd, const std::string& name, const std::string& shown, int err) {
  if (err == ENOTDIR || err == ELOOP) {
    struct stat st {};
    if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      return Refuse(shown, S_ISLNK(st.st_mode)
                               ? "is a symbolic link; privhelper never follows one"
                               : absl::StrCat("is ", Kind(st.st_mode), ", not a directory"));
    }
  }
  return ErrnoStatus(err, absl::StrCat("open ", shown));
}

// Checks the directory just opened as `shown`. `last` is the directory itself.
absl::Status CheckDirectory(const struct stat& st, const std::string& shown, bool last) {
  if (!S_ISDIR(st.st_mode)) return Refuse(shown, "is not a directory");
  if (!IsTrustedOwner(st.st_uid)) {
    return Refuse(shown, absl::StrCat("is owned by uid ", st.st_uid,
                                      "; privhelper trusts only directories owned by root"));
  }
  if (!WritableByOthers(st.st_mode)) return absl::OkStatus();
  if (!last && (st.st_mode & S_ISVTX) != 0) return absl::OkStatus();  // e.g. /tmp
  return Refuse(shown, absl::StrCat("is writable by group or others (mode ", Mode(st.st_mode),
                                    last ? ")" : ") and not a sticky directory"));
}

}  // namespace

void OwnedFd::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool IsTrustedOwner(uid_t uid) { return uid == 0 || uid == geteuid(); }

absl::StatusOr<std::pair<std::string, std::string>> SplitParent(std::string_view path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("not an absolute path: ", AbslView(path)));
  }
  if (path.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("path contains NUL");
  }
  size_t slash = path.rfind('/');
  std::string name(path.substr(slash + 1));
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(path), ": the last component must be a file name"));
  }
  std::string_view dir = path.substr(0, slash);
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  // Built once (not assigned "/" afterwards: GCC 12 at -O2 reports a false -Wrestrict on that
  // assignment, which broke `-c opt` builds of privhelper).
  return std::make_pair(dir.empty() ? std::string("/") : std::string(dir), std::move(name));
}

absl::StatusOr<OwnedFd> OpenTrustedDirectory(std::string_view dir) {
  if (dir.empty() || dir[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("not an absolute path: ", AbslView(dir)));
  }
  if (dir.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("path contains NUL");
  }
  std::vector<std::string> parts;
  for (size_t pos = 0; pos < dir.size();) {
    size_t end = dir.find('/', pos);
    if (end == std::string_view::npos) end = dir.size();
    std::string part(dir.substr(pos, end - pos));
    pos = end + 1;
    if (part.empty()) continue;
    if (part == "." || part == "..") {
      return Refuse(dir, "contains a \".\" or \"..\" component");
    }
    parts.push_back(std::move(part));
  }

  OwnedFd cur(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!cur.valid()) return ErrnoStatus(errno, "open /");
  std::string shown = "/";
  struct stat st {};
  if (fstat(cur.get(), &st) != 0) return ErrnoStatus(errno, "stat /");
  absl::Status s = CheckDirectory(st, shown, parts.empty());
  if (!s.ok()) return s;

  for (size_t i = 0; i < parts.size(); ++i) {
    shown = absl::StrCat(shown == "/" ? "" : shown, "/", parts[i]);
    OwnedFd next(openat(cur.get(), parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) return OpenFailure(cur.get(), parts[i], shown, errno);
    if (fstat(next.get(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat ", shown));
    s = CheckDirectory(st, shown, i + 1 == parts.size());
    if (!s.ok()) return s;
    cur = std::move(next);
  }
  return cur;
}

absl::StatusOr<OwnedFd> OpenTrustedFile(std::string_view path) {
  absl::StatusOr<std::pair<std::string, std::string>> split = SplitParent(path);
  if (!split.ok()) return split.status();
  absl::StatusOr<OwnedFd> dir = OpenTrustedDirectory(split->first);
  if (!dir.ok()) return dir.status();
  const std::string shown(path);
  OwnedFd fd(openat(dir->get(), split->second.c_str(),
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    if (err == ELOOP) return Refuse(shown, "is a symbolic link; privhelper never follows one");
    return ErrnoStatus(err, absl::StrCat("open ", shown));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat ", shown));
  if (!S_ISREG(st.st_mode)) {
    return Refuse(shown, absl::StrCat("is ", Kind(st.st_mode), ", not a regular file"));
  }
  if (!IsTrustedOwner(st.st_uid)) {
    return Refuse(shown, absl::StrCat("is owned by uid ", st.st_uid,
                                      "; privhelper trusts only files owned by root"));
  }
  if (WritableByOthers(st.st_mode)) {
    return Refuse(shown, absl::StrCat("is writable by group or others (mode ", Mode(st.st_mode),
                                      ")"));
  }
  return fd;
}

}  // namespace sn::privhelper

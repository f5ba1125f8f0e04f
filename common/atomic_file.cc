#include "common/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"

namespace sn {
namespace {

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ErrnoStatus(int err, std::string_view what) {
  std::string msg = absl::StrCat(absl::string_view(what.data(), what.size()), ": ", strerror(err));
  switch (err) {
    case ENOENT: return absl::NotFoundError(msg);
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(msg);
    case EEXIST: return absl::AlreadyExistsError(msg);
    case ENOSPC:
    case EDQUOT: return absl::ResourceExhaustedError(msg);
    case EAGAIN:
    case EINTR: return absl::UnavailableError(msg);
    default: return absl::InternalError(msg);
  }
}

absl::Status SyncDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open directory ", dir));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus(err, absl::StrCat("fsync directory ", dir));
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents, int mode) {
  const std::string dir = DirName(path);
  thread_local absl::BitGen gen;  // seeded once per thread (fs/durable.cc's TempName)
  const std::string tmp =
      absl::StrCat(path, ".tmp.", getpid(), ".", absl::Uniform<uint64_t>(gen));
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("create ", tmp));
  absl::Status st = WriteAll(fd, contents);
  if (st.ok() && fchmod(fd, mode) != 0) st = ErrnoStatus(errno, "fchmod");
  if (st.ok() && fsync(fd) != 0) st = ErrnoStatus(errno, absl::StrCat("fsync ", tmp));
  if (close(fd) != 0 && st.ok()) st = ErrnoStatus(errno, absl::StrCat("close ", tmp));
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoStatus(errno, absl::StrCat("rename to ", path));
  }
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  return SyncDirectory(dir);
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return ErrnoStatus(err, absl::StrCat("stat ", path));
  }
  if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > max_bytes) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not a regular file of at most ", max_bytes, " bytes"));
  }
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = read(fd, out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return ErrnoStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  close(fd);
  return out;
}

absl::Status MakeDirs(const std::string& dir, int mode) {
  if (dir.empty()) return absl::InvalidArgumentError("empty directory path");
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    cur = dir.substr(0, pos);
    if (cur.empty()) continue;
    if (mkdir(cur.c_str(), mode) == 0) {
      if (chmod(cur.c_str(), mode) != 0) return ErrnoStatus(errno, absl::StrCat("chmod ", cur));
    } else if (errno != EEXIST) {
      return ErrnoStatus(errno, absl::StrCat("mkdir ", cur));
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace sn

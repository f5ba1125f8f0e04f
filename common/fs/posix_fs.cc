#include "common/fs/posix_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"

namespace sn::fs {
namespace {

// statx of `name` in `dirfd` (AT_EMPTY_PATH with "" for the descriptor itself), never
// following a symlink.
absl::StatusOr<FileInfo> InfoAt(int dirfd, const char* name, std::string_view what) {
  struct statx sx {};
  const int flags = AT_SYMLINK_NOFOLLOW | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
  if (statx(dirfd, name, flags, STATX_BASIC_STATS | STATX_BTIME, &sx) != 0) {
    return ErrnoStatus(errno, absl::StrCat("stat ", AV(what)));
  }
  FileInfo i;
  const mode_t m = sx.stx_mode;
  if (S_ISREG(m)) {
    i.type = FileType::kRegular;
  } else if (S_ISDIR(m)) {
    i.type = FileType::kDirectory;
  } else if (S_ISLNK(m)) {
    i.type = FileType::kSymlink;
  } else if (S_ISSOCK(m)) {
    i.type = FileType::kSocket;
  }
  i.mode = m & 07777;
  i.uid = sx.stx_uid;
  i.gid = sx.stx_gid;
  i.nlink = sx.stx_nlink;
  i.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  i.ino = sx.stx_ino;
  i.size = sx.stx_size;
  if ((sx.stx_mask & STATX_BTIME) != 0) {
    i.birth_ns = sx.stx_btime.tv_sec * int64_t{1000000000} + sx.stx_btime.tv_nsec;
  }
  return i;
}


absl::Status CheckName(std::string_view name) {
  if (!IsComponent(name)) {
    return absl::InvalidArgumentError(absl::StrCat("not a single path component: \"", AV(name), "\""));
  }
  return absl::OkStatus();
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) close(fd_);
  }
  absl::Status Append(std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, absl::StrCat("write ", name_));
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (fsync(fd_) != 0) return ErrnoStatus(errno, absl::StrCat("fsync ", name_));
    return absl::OkStatus();
  }
  absl::Status Close() override {
    int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && close(fd) != 0) return ErrnoStatus(errno, absl::StrCat("close ", name_));
    return absl::OkStatus();
  }

 private:
  int fd_;
  const std::string name_;
};

class PosixReadableFile final : public ReadableFile {
 public:
  PosixReadableFile(int fd, FileInfo info, std::string name)
      : fd_(fd), info_(info), name_(std::move(name)) {}
  ~PosixReadableFile() override { close(fd_); }
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    for (;;) {
      ssize_t r = read(fd_, buf, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno != EINTR) return ErrnoStatus(errno, absl::StrCat("read ", name_));
    }
  }
  const FileInfo& info() const override { return info_; }
  int fd() const override { return fd_; }

 private:
  const int fd_;
  const FileInfo info_;
  const std::string name_;
};

class PosixFileLock final : public FileLock {
 public:
  PosixFileLock(int fd, FileInfo info) : fd_(fd), info_(info) {}
  ~PosixFileLock() override { close(fd_); }  // the lock stays with other holders' copies
  int fd() const override { return fd_; }
  const FileInfo& info() const override { return info_; }

 private:
  const int fd_;
  const FileInfo info_;
};

}  // namespace

PosixFs* PosixFs::Get() {
  static PosixFs* fs = new PosixFs();
  return fs;
}

void PosixFs::CloseDir(int handle) {
  if (handle >= 0) close(handle);
}

absl::StatusOr<Dir> PosixFs::OpenPath(std::string_view path) {
  const std::string p(path);
  if (p.empty() || p.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("not a directory path");
  }
  int fd = open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open directory ", p));
  return Dir(this, fd);
}

absl::StatusOr<Dir> PosixFs::OpenDirAt(const Dir& parent, std::string_view name) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  const std::string n(name);
  int fd = openat(parent.handle(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return absl::FailedPreconditionError(absl::StrCat("\"", n, "\" is not a directory (or is a symlink)"));
    }
    return ErrnoStatus(errno, absl::StrCat("open directory ", n));
  }
  return Dir(this, fd);
}

absl::Status PosixFs::MakeDirAt(const Dir& parent, std::string_view name, uint32_t mode) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  const std::string n(name);
  if (mkdirat(parent.handle(), n.c_str(), mode) != 0) {
    return ErrnoStatus(errno, absl::StrCat("mkdir ", n));
  }
  return absl::OkStatus();
}

absl::StatusOr<FileInfo> PosixFs::StatAt(const Dir& dir, std::string_view name) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  const std::string n(name);
  return InfoAt(dir.handle(), n.c_str(), n);
}

absl::StatusOr<FileInfo> PosixFs::StatDir(const Dir& dir) {
  return InfoAt(dir.handle(), "", "directory");
}

absl::StatusOr<std::vector<std::string>> PosixFs::ListDir(const Dir& dir) {
  int fd = openat(dir.handle(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "reopen directory");
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    int err = errno;
    close(fd);
    return ErrnoStatus(err, "fdopendir");
  }
  std::vector<std::string> out;
  errno = 0;
  while (struct dirent* e = readdir(d)) {
    std::string_view n(e->d_name);
    if (n != "." && n != "..") out.emplace_back(n);
    errno = 0;
  }
  int err = errno;
  closedir(d);
  if (err != 0) return ErrnoStatus(err, "readdir");
  return out;
}

absl::StatusOr<std::string> PosixFs::ReadFileAt(const Dir& dir, std::string_view name,
                                                size_t max_bytes, FileInfo* info) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  const std::string n(name);
  int fd = openat(dir.handle(), n.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) return absl::FailedPreconditionError(absl::StrCat(n, " is a symlink"));
    return ErrnoStatus(errno, absl::StrCat("open ", n));
  }
  absl::StatusOr<FileInfo> st = InfoAt(fd, "", n);
  if (!st.ok()) {
    close(fd);
    return st.status();
  }
  if (info != nullptr) *info = *st;
  if (st->type != FileType::kRegular || st->size > max_bytes) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(n, ": not a regular file of at most ", max_bytes, " bytes"));
  }
  std::string out(static_cast<size_t>(st->size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t r = read(fd, out.data() + got, out.size() - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return ErrnoStatus(err, absl::StrCat("read ", n));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  close(fd);
  if (got != out.size()) {
    return absl::DataLossError(absl::StrCat(n, ": changed size while being read"));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<ReadableFile>> PosixFs::OpenReadAt(const Dir& dir,
                                                                  std::string_view name) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  const std::string n(name);
  int fd = openat(dir.handle(), n.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) return absl::FailedPreconditionError(absl::StrCat(n, " is a symlink"));
    return ErrnoStatus(errno, absl::StrCat("open ", n));
  }
  absl::StatusOr<FileInfo> st = InfoAt(fd, "", n);
  if (!st.ok() || st->type != FileType::kRegular) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(n, " is not a regular file"));
  }
  return std::unique_ptr<ReadableFile>(new PosixReadableFile(fd, *st, n));
}

absl::StatusOr<std::unique_ptr<WritableFile>> PosixFs::CreateExclusiveAt(const Dir& dir,
                                                                         std::string_view name,
                                                                         uint32_t mode) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  const std::string n(name);
  int fd = openat(dir.handle(), n.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("create ", n));
  // The umask may have narrowed the mode; never widened. Make it exact.
  if (fchmod(fd, mode) != 0) {
    int err = errno;
    close(fd);
    unlinkat(dir.handle(), n.c_str(), 0);
    return ErrnoStatus(err, absl::StrCat("fchmod ", n));
  }
  return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, n));
}

absl::Status PosixFs::RenameAt(const Dir& dir, std::string_view from, std::string_view to,
                               bool no_replace) {
  if (absl::Status s = CheckName(from); !s.ok()) return s;
  if (absl::Status s = CheckName(to); !s.ok()) return s;
  const std::string f(from), t(to);
  if (renameat2(dir.handle(), f.c_str(), dir.handle(), t.c_str(),
                no_replace ? RENAME_NOREPLACE : 0) != 0) {
    return ErrnoStatus(errno, absl::StrCat("rename ", f, " to ", t));
  }
  return absl::OkStatus();
}

absl::Status PosixFs::UnlinkAt(const Dir& dir, std::string_view name) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  const std::string n(name);
  if (unlinkat(dir.handle(), n.c_str(), 0) != 0) {
    return ErrnoStatus(errno, absl::StrCat("unlink ", n));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FileLock>> PosixFs::LockAt(const Dir& dir, std::string_view name,
                                                           LockMode mode) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  const std::string n(name);
  int fd = openat(dir.handle(), n.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) return absl::FailedPreconditionError(absl::StrCat(n, " is a symlink"));
    return ErrnoStatus(errno, absl::StrCat("open ", n));
  }
  absl::StatusOr<FileInfo> opened = InfoAt(fd, "", n);
  if (!opened.ok() || opened->type != FileType::kRegular) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(n, " is not a regular file"));
  }
  const int op = (mode == LockMode::kShared ? LOCK_SH : LOCK_EX) | LOCK_NB;
  while (flock(fd, op) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) return absl::UnavailableError(absl::StrCat(n, " is locked"));
    return ErrnoStatus(err, absl::StrCat("flock ", n));
  }
  absl::StatusOr<FileInfo> locked = InfoAt(fd, "", n);
  if (!locked.ok()) {
    close(fd);
    return locked.status();
  }
  return std::unique_ptr<FileLock>(new PosixFileLock(fd, *locked));
}

absl::Status PosixFs::SyncDir(const Dir& dir) {
  if (fsync(dir.handle()) != 0) return ErrnoStatus(errno, "fsync directory");
  return absl::OkStatus();
}

}  // namespace sn::fs

#include "tools/release/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <random>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/sha256.h"

namespace sn::release_tool {
namespace {

constexpr size_t kChunkBytes = 64 * 1024;

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "write " + path);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status FinishFile(int fd, int mode, const std::string& path) {
  if (fchmod(fd, static_cast<mode_t>(mode)) != 0) return ErrnoStatus(errno, "chmod " + path);
  if (fsync(fd) != 0) return ErrnoStatus(errno, "fsync " + path);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PublishLock> PublishLock::Acquire(const std::string& releases_dir) {
  const std::string path = absl::StrCat(releases_dir, "/", std::string(kLockFileName));
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus(errno, "open " + path);
  int rc;
  do {
    rc = flock(fd, LOCK_EX);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, "lock " + path);
  }
  return PublishLock(fd);
}

PublishLock::~PublishLock() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<Copied> CopyNewFile(const std::string& from, const std::string& to, int mode) {
  const int in = open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (in < 0) return ErrnoStatus(errno, "open " + from);
  absl::Cleanup close_in = [in] { close(in); };
  struct stat st;
  if (fstat(in, &st) != 0) return ErrnoStatus(errno, "stat " + from);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(from + " is not a regular file");
  const int out = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) return ErrnoStatus(errno, "create " + to);
  bool keep = false;
  absl::Cleanup close_out = [&] {
    close(out);
    if (!keep) unlink(to.c_str());
  };
  Sha256Stream hash;
  std::vector<char> buf(kChunkBytes);
  Copied copied;
  for (;;) {
    const ssize_t n = read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "read " + from);
    if (n == 0) break;
    const std::string_view chunk(buf.data(), static_cast<size_t>(n));
    absl::Status w = WriteAll(out, chunk, to);
    if (!w.ok()) return w;
    hash.Update(chunk);
    copied.size += n;
  }
  absl::Status fin = FinishFile(out, mode, to);
  if (!fin.ok()) return fin;
  copied.sha256 = hash.FinishHex();
  keep = true;
  return copied;
}

absl::Status WriteNewFile(const std::string& path, std::string_view contents, int mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus(errno, "create " + path);
  absl::Status st = WriteAll(fd, contents, path);
  if (st.ok()) st = FinishFile(fd, mode, path);
  close(fd);
  if (!st.ok()) unlink(path.c_str());
  return st;
}

absl::Status RenameNoReplace(const std::string& from, const std::string& to, bool directory) {
  if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    return absl::OkStatus();
  }
  if (errno != EINVAL && errno != ENOSYS) return ErrnoStatus(errno, "rename to " + to);
  if (!directory) {
    // link(2) never replaces; the staging name is dropped once the final name exists.
    if (link(from.c_str(), to.c_str()) != 0) return ErrnoStatus(errno, "link to " + to);
    unlink(from.c_str());
    return absl::OkStatus();
  }
  // Under the publish lock nobody creates `to`; rename(2) would only replace an empty one.
  struct stat st;
  if (lstat(to.c_str(), &st) == 0) return absl::AlreadyExistsError(to + " exists");
  if (rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus(errno, "rename to " + to);
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakeStagingDir(const std::string& parent, int mode) {
  std::string tmpl = absl::StrCat(parent, "/", std::string(kStagingPrefix), "XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return ErrnoStatus(errno, "mkdtemp in " + parent);
  if (chmod(tmpl.c_str(), static_cast<mode_t>(mode)) != 0) {
    const int err = errno;
    rmdir(tmpl.c_str());
    return ErrnoStatus(err, "chmod " + tmpl);
  }
  return tmpl;
}

std::string StagingFilePath(const std::string& dir, std::string_view name) {
  std::random_device rd;
  return absl::StrCat(dir, "/", std::string(kStagingPrefix), std::string(name), "-",
                      absl::Hex(rd(), absl::kZeroPad8), absl::Hex(rd(), absl::kZeroPad8));
}

void RemoveTree(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = ListDir(dir);
  if (names.ok()) {
    for (const std::string& n : *names) unlink(absl::StrCat(dir, "/", n).c_str());
  }
  rmdir(dir.c_str());
}

std::vector<std::string> RemoveStaging(const std::string& dir) {
  std::vector<std::string> failed;
  absl::StatusOr<std::vector<std::string>> names = ListDir(dir);
  if (!names.ok()) return failed;
  for (const std::string& n : *names) {
    if (n.rfind(kStagingPrefix, 0) != 0) continue;
    const std::string path = absl::StrCat(dir, "/", n);
    absl::StatusOr<EntryType> type = TypeOf(path);
    if (type.ok() && *type == EntryType::kDirectory) {
      RemoveTree(path);
    } else {
      unlink(path.c_str());
    }
    if (TypeOf(path).value_or(EntryType::kOther) != EntryType::kMissing) failed.push_back(n);
  }
  return failed;
}

absl::StatusOr<EntryType> TypeOf(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return EntryType::kMissing;
    return ErrnoStatus(errno, "stat " + path);
  }
  if (S_ISREG(st.st_mode)) return EntryType::kRegular;
  if (S_ISDIR(st.st_mode)) return EntryType::kDirectory;
  return EntryType::kOther;
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus(errno, "open directory " + dir);
  absl::Cleanup closer = [d] { closedir(d); };
  std::vector<std::string> out;
  errno = 0;
  while (const dirent* e = readdir(d)) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") out.emplace_back(n);
    errno = 0;
  }
  if (errno != 0) return ErrnoStatus(errno, "read directory " + dir);
  std::sort(out.begin(), out.end());
  return out;
}

std::string BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace sn::release_tool

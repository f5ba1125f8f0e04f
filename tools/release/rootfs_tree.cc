#include "tools/release/rootfs_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace sn::release_tool::rootfs {
namespace {

constexpr uint64_t kBlock = 4096;
// A walk deeper than this is refused (a layer's tree is at most kMaxPathComponents deep; a
// --dir tree this deep is not a root file system).
constexpr int kMaxWalkDepth = 1024;

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

absl::Status Refuse(std::string_view entry, std::string_view why) {
  return absl::FailedPreconditionError(
      absl::StrCat("layer entry \"", absl::string_view(entry.data(), entry.size()), "\" ",
                   absl::string_view(why.data(), why.size())));
}

absl::StatusOr<UniqueFd> OpenSubdir(int dir_fd, const std::string& name) {
  const int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open directory " + name);
  return UniqueFd(fd);
}

absl::Status Walk(int dir_fd, const std::string& prefix, const TreeVisitor& visit, int depth) {
  if (depth > kMaxWalkDepth) {
    return absl::FailedPreconditionError(absl::StrCat("the tree is deeper than ", kMaxWalkDepth,
                                                      " directories at ", prefix));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir_fd));
  for (const std::string& name : names) {
    const std::string path = prefix.empty() ? name : absl::StrCat(prefix, "/", name);
    struct stat st;
    if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoStatus(errno, "stat " + path);
    }
    if (S_ISDIR(st.st_mode)) {
      ASSIGN_OR_RETURN(UniqueFd sub, OpenSubdir(dir_fd, name));
      RETURN_IF_ERROR(Walk(sub.get(), path, visit, depth + 1));
    }
    RETURN_IF_ERROR(visit(dir_fd, name, path, st));
  }
  return absl::OkStatus();
}

// Removes the extended attributes `list`/`remove` reach (a path or a descriptor).
template <typename List, typename Remove>
absl::Status RemoveAllXattrs(List list, Remove remove, const std::string& path) {
  std::vector<char> names(64 * 1024);
  const ssize_t n = list(names.data(), names.size());
  if (n < 0 && (errno == ENOTSUP || errno == EPERM)) return absl::OkStatus();
  if (n < 0) return ErrnoStatus(errno, "list the extended attributes of " + path);
  for (const char* k = names.data(); k < names.data() + n; k += strlen(k) + 1) {
    if (remove(k) != 0) {
      return ErrnoStatus(errno, absl::StrCat("remove the extended attribute ", k, " of ", path,
                                             " (the image would depend on this host)"));
    }
  }
  return absl::OkStatus();
}

// The blocks of a directory holding entries of `entry_bytes` (ext4 records: 8 bytes and the
// name rounded to 4), with one more for the hash-tree root of a directory over one block.
uint64_t DirectoryBytes(uint64_t entry_bytes) {
  const uint64_t bytes = RoundUp(entry_bytes + 24, kBlock);  // "." and ".."
  return bytes > kBlock ? bytes + kBlock : bytes;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::vector<std::string>> SplitEntryName(std::string_view name) {
  if (name.empty()) return Refuse(name, "has an empty name");
  if (name.front() == '/') return Refuse(name, "is an absolute path");
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    const std::string_view part = name.substr(start, slash - start);
    start = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") return Refuse(name, "has a \"..\" component (it would escape the root)");
    parts.emplace_back(part);
  }
  if (parts.size() > kMaxPathComponents) {
    return Refuse(name, absl::StrCat("has more than ", kMaxPathComponents, " components"));
  }
  return parts;
}

std::string JoinComponents(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < parts.size(); ++i) {
    if (i > 0) out += '/';
    out += parts[i];
  }
  return out;
}

absl::StatusOr<UniqueFd> OpenDirBelow(int root_fd, const std::vector<std::string>& parts,
                                      size_t n, std::string_view entry) {
  const int first = dup(root_fd);
  if (first < 0) return ErrnoStatus(errno, "dup");
  UniqueFd dir(first);
  for (size_t i = 0; i < n; ++i) {
    struct stat st;
    if (fstatat(dir.get(), parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return UniqueFd();
      return ErrnoStatus(errno, "stat " + JoinComponents(parts, i + 1));
    }
    if (S_ISLNK(st.st_mode)) {
      return Refuse(entry, absl::StrCat("goes through the symbolic link \"",
                                        JoinComponents(parts, i + 1), "\""));
    }
    if (!S_ISDIR(st.st_mode)) return UniqueFd();
    ASSIGN_OR_RETURN(dir, OpenSubdir(dir.get(), parts[i]));
  }
  return dir;
}

absl::StatusOr<std::vector<std::string>> ListNames(int dir_fd) {
  const int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open directory");
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, "fdopendir");
  }
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = readdir(d)) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
    errno = 0;
  }
  const int err = errno;
  closedir(d);
  if (err != 0) return ErrnoStatus(err, "readdir");
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status RemoveAt(int dir_fd, const std::string& name) {
  struct stat st;
  if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(errno, "stat " + name);
  }
  if (S_ISDIR(st.st_mode)) {
    ASSIGN_OR_RETURN(UniqueFd sub, OpenSubdir(dir_fd, name));
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(sub.get()));
    for (const std::string& n : names) RETURN_IF_ERROR(RemoveAt(sub.get(), n));
  }
  if (unlinkat(dir_fd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0) {
    return ErrnoStatus(errno, "remove " + name);
  }
  return absl::OkStatus();
}

void RemoveTreeAt(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const int fd = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)RemoveAt(fd, base);
  close(fd);
}

absl::Status WalkTree(int dir_fd, const TreeVisitor& visit) { return Walk(dir_fd, "", visit, 0); }

absl::Status RemoveXattrs(int fd, const std::string& path) {
  return RemoveAllXattrs([fd](char* buf, size_t n) { return flistxattr(fd, buf, n); },
                         [fd](const char* k) { return fremovexattr(fd, k); }, path);
}

absl::Status NormalizeTree(int root_fd, int64_t epoch) {
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(epoch);
  ts[0].tv_nsec = ts[1].tv_nsec = 0;
  RETURN_IF_ERROR(WalkTree(root_fd, [&ts](int dir_fd, const std::string& name,
                                          const std::string& path, const struct stat&) {
    const std::string p = absl::StrCat("/proc/self/fd/", dir_fd, "/", name);
    RETURN_IF_ERROR(RemoveAllXattrs(
        [&p](char* buf, size_t n) { return llistxattr(p.c_str(), buf, n); },
        [&p](const char* k) { return lremovexattr(p.c_str(), k); }, path));
    if (utimensat(dir_fd, name.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoStatus(errno, "set the times of " + path);
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(RemoveXattrs(root_fd, "the root"));
  if (futimens(root_fd, ts) != 0) return ErrnoStatus(errno, "set the times of the root");
  return absl::OkStatus();
}

absl::StatusOr<TreeSize> MeasureTree(int root_fd) {
  TreeSize size;
  std::set<std::pair<dev_t, ino_t>> linked;  // inodes with more than one name, seen once
  std::map<std::string, uint64_t> entry_bytes;  // directory path -> bytes of its entries
  auto parent_of = [](const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash);
  };
  RETURN_IF_ERROR(WalkTree(root_fd, [&](int, const std::string& name, const std::string& path,
                                        const struct stat& st) {
    entry_bytes[parent_of(path)] += 8 + RoundUp(name.size(), 4);
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 &&
        !linked.insert({st.st_dev, st.st_ino}).second) {
      return absl::OkStatus();  // another name of an inode already counted
    }
    ++size.inodes;
    if (S_ISREG(st.st_mode)) size.data_bytes += RoundUp(static_cast<uint64_t>(st.st_size), kBlock);
    if (S_ISLNK(st.st_mode) && st.st_size >= 60) size.data_bytes += kBlock;
    if (S_ISDIR(st.st_mode)) {
      size.data_bytes += DirectoryBytes(entry_bytes[path]);
      entry_bytes.erase(path);
    }
    return absl::OkStatus();
  }));
  size.data_bytes += DirectoryBytes(entry_bytes[""]);
  return size;
}

}  // namespace sn::release_tool::rootfs

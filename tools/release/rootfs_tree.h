// Directory-tree steps of `release rootfs` (tools/release/rootfs.h), all relative to directory
// file descriptors and never following a symbolic link: the tree being built holds whatever
// the layers put there, so a symlink in it must never lead a removal or a time change outside.
#ifndef SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_TREE_H_
#define SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_TREE_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sn::release_tool::rootfs {

// A layer entry name has at most this many components (so every walk of the tree is at most
// this deep and holds at most this many descriptors).
inline constexpr size_t kMaxPathComponents = 256;

// An owned file descriptor (-1: none).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The components of a layer entry name: "./a//b/" -> {"a", "b"}; "." or "./" -> {} (the root).
// FailedPrecondition naming the entry for an absolute name, a ".." component, an empty name or
// more than kMaxPathComponents components.
absl::StatusOr<std::vector<std::string>> SplitEntryName(std::string_view name);

// "a/b/c" from components.
std::string JoinComponents(const std::vector<std::string>& parts, size_t n);

// Opens the directory made of the first `n` of `parts` below `root_fd`, component by component
// with O_NOFOLLOW. An invalid UniqueFd (and OK) when a component is missing or is not a
// directory; FailedPrecondition naming `entry` when a component is a symbolic link.
absl::StatusOr<UniqueFd> OpenDirBelow(int root_fd, const std::vector<std::string>& parts,
                                      size_t n, std::string_view entry);

// Removes `name` in `dir_fd` and, for a directory, everything below it. OK when it is missing.
absl::Status RemoveAt(int dir_fd, const std::string& name);

// Removes the directory `path` and everything below it (best effort, never following links).
void RemoveTreeAt(const std::string& path);

// The names in the directory `dir_fd` except "." and "..", sorted.
absl::StatusOr<std::vector<std::string>> ListNames(int dir_fd);

// Visits every entry below `dir_fd` depth first, a directory after its contents: `visit` gets
// the directory that holds the entry, its name, its path relative to the walk's root and its
// lstat.
using TreeVisitor = std::function<absl::Status(int dir_fd, const std::string& name,
                                               const std::string& path, const struct stat& st)>;
absl::Status WalkTree(int dir_fd, const TreeVisitor& visit);

// Removes every extended attribute of the directory `fd` (POSIX ACLs, security labels).
absl::Status RemoveXattrs(int fd, const std::string& path);

// Normalises the tree below `root_fd` (and the root itself), bottom-up: removes every extended
// attribute (layers set none, so any there came from the host: an inherited default ACL, a
// security label) and sets atime and mtime to `epoch` (seconds) with AT_SYMLINK_NOFOLLOW.
// Needs /proc (attributes of an entry are reached as /proc/self/fd/<dir>/<name>, never
// following a final symbolic link, never opening a device node).
absl::Status NormalizeTree(int root_fd, int64_t epoch);

// What an ext4 image of a tree needs.
struct TreeSize {
  uint64_t inodes = 0;      // distinct inodes below the root (hard links counted once)
  uint64_t data_bytes = 0;  // file, directory and long-symlink blocks, 4 KiB each
};
absl::StatusOr<TreeSize> MeasureTree(int root_fd);

}  // namespace sn::release_tool::rootfs

#endif  // SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_TREE_H_

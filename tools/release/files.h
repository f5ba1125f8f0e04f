// File-system steps of the publisher (tools/release), each durable before it returns:
// exclusive creation, streaming copies that hash what they write, renames that never replace,
// and the lock that serializes publishers of one releases directory. Thread-compatible; the
// caller holds the lock (PublishLock) for everything else here.
#ifndef SANDBOX_NODE_TOOLS_RELEASE_FILES_H_
#define SANDBOX_NODE_TOOLS_RELEASE_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sn::release_tool {

inline constexpr std::string_view kLockFileName = ".publish.lock";
// Prefix of every temporary entry the publisher creates (directories in the releases
// directory, files in a release directory). No source or artifact name can start with '.',
// so nothing with this prefix is ever served.
inline constexpr std::string_view kStagingPrefix = ".staging-";

// An exclusive flock on <releases>/.publish.lock, held until destroyed. Blocks while another
// publisher holds it.
class PublishLock {
 public:
  static absl::StatusOr<PublishLock> Acquire(const std::string& releases_dir);
  PublishLock(PublishLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  PublishLock& operator=(PublishLock&&) = delete;
  ~PublishLock();

 private:
  explicit PublishLock(int fd) : fd_(fd) {}
  int fd_;
};

// What a copy wrote.
struct Copied {
  std::string sha256;
  int64_t size = 0;
};

// Copies the regular file `from` into the new file `to` (O_EXCL, never replacing anything),
// 64 KiB at a time, hashing the bytes as they are written; then sets `mode` and fsyncs `to`.
// On failure `to` is removed.
absl::StatusOr<Copied> CopyNewFile(const std::string& from, const std::string& to, int mode);

// Creates `path` exclusively with `contents` and `mode`, fsynced.
absl::Status WriteNewFile(const std::string& path, std::string_view contents, int mode);

// rename(2) that fails with AlreadyExists instead of replacing `to` (renameat2
// RENAME_NOREPLACE; where the file system lacks it: link+unlink for files, and for
// directories a rename that cannot replace a non-empty directory). Does not fsync.
absl::Status RenameNoReplace(const std::string& from, const std::string& to, bool directory);

// A new private directory `<parent>/.staging-XXXXXX`, then chmod `mode`.
absl::StatusOr<std::string> MakeStagingDir(const std::string& parent, int mode);
// A fresh path `<dir>/.staging-<name>-<random hex>` for CopyNewFile (which creates it
// exclusively).
std::string StagingFilePath(const std::string& dir, std::string_view name);

// Removes every `.staging-*` entry of `dir`: files, and directories holding only files.
// Only safe under the PublishLock (they are a crashed publisher's leftovers). Best effort:
// returns the names it could not remove.
std::vector<std::string> RemoveStaging(const std::string& dir);
// Removes a staging directory and the files in it (best effort).
void RemoveTree(const std::string& dir);

enum class EntryType { kMissing, kRegular, kDirectory, kOther };
// lstat(2): a symlink is kOther.
absl::StatusOr<EntryType> TypeOf(const std::string& path);
// The names in `dir` except "." and "..", sorted.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir);

// The last path component of `path` ("a/b.tar" -> "b.tar"; "" for "a/").
std::string BaseName(std::string_view path);

}  // namespace sn::release_tool

#endif  // SANDBOX_NODE_TOOLS_RELEASE_FILES_H_

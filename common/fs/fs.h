// The filesystem seam of the node's durable state (after LevelDB's Env): every durable change
// to state the node owns (privhelper's store, the agent's state files and operation record)
// goes through an Fs, so tests can substitute an implementation that injects faults (failed
// fsync, ENOSPC, a crash that drops what was not yet durable): tests/fakes/fault_fs.h.
//
// The API is directory-handle based: a Dir is an open directory, and every name passed with a
// Dir is ONE path component (no '/', not "." or ".."). Nothing here follows a symlink: a
// symlink is reported as such by StatAt and refused by every open. The first Dir comes from
// OpenPath (the agent's state directory) or from the implementation (privhelper's state
// directory: privhelper/store/state_dir.h, through a trusted path).
//
// Thread-safety: an Fs and its Dirs may be used from several threads; a WritableFile by one.
#ifndef SANDBOX_NODE_COMMON_FS_FS_H_
#define SANDBOX_NODE_COMMON_FS_FS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sn::fs {

enum class FileType { kRegular, kDirectory, kSymlink, kSocket, kOther };

struct FileInfo {
  FileType type = FileType::kOther;
  uint32_t mode = 0;  // permission bits and sticky/setid bits (07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t nlink = 0;
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  // Birth time in nanoseconds since the epoch (statx), 0 when the filesystem does not record
  // it. With device and inode it tells a recreated file from the original even when the
  // kernel reused the inode number.
  int64_t birth_ns = 0;
};

class Fs;

// An open directory. Move-only; closes itself.
class Dir {
 public:
  Dir() = default;
  Dir(Fs* fs, int handle) : fs_(fs), handle_(handle) {}
  Dir(Dir&& o) noexcept : fs_(o.fs_), handle_(o.handle_) { o.fs_ = nullptr; }
  Dir& operator=(Dir&& o) noexcept;
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;
  ~Dir();

  bool valid() const { return fs_ != nullptr; }
  int handle() const { return handle_; }  // implementation-defined (an fd for PosixFs)

 private:
  Fs* fs_ = nullptr;
  int handle_ = -1;
};

// A file being written. Data is durable only after Sync() returned OK.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(std::string_view data) = 0;
  virtual absl::Status Sync() = 0;
  virtual absl::Status Close() = 0;
};

// A file open for reading.
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Reads up to `n` bytes at the current position; 0 at the end.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
  // What the open descriptor describes (fstat at open).
  virtual const FileInfo& info() const = 0;
  // The descriptor (PosixFs: a real fd, e.g. to stream a file to a daemon); -1 when simulated.
  virtual int fd() const = 0;
};

// An open file holding a flock (shared or exclusive) on its open file description. The lock
// goes with the description: a child that inherits the descriptor (the native helper) holds
// it until its own copy is closed too. Never unlocked explicitly (a LOCK_UN would release it
// for every holder of the description).
class FileLock {
 public:
  virtual ~FileLock() = default;
  // The descriptor (PosixFs: a real fd a child may inherit); -1 for a simulated lock.
  virtual int fd() const = 0;
  // What the open descriptor describes (fstat), taken once the lock was held.
  virtual const FileInfo& info() const = 0;
};

enum class LockMode { kShared, kExclusive };

class Fs {
 public:
  virtual ~Fs() = default;

  // Opens the directory `path` as this process names it (PosixFs: a path the kernel resolves,
  // symlinks included, as any open(2); FaultFs: '/'-separated from its root, following
  // nothing). NotFound when it does not exist. Never used for privhelper's own state.
  virtual absl::StatusOr<Dir> OpenPath(std::string_view path) = 0;

  // Opens the subdirectory `name` of `parent` (not a symlink).
  virtual absl::StatusOr<Dir> OpenDirAt(const Dir& parent, std::string_view name) = 0;
  // Creates the subdirectory `name` (AlreadyExists when anything is there).
  virtual absl::Status MakeDirAt(const Dir& parent, std::string_view name, uint32_t mode) = 0;

  // The entry `name` itself (a symlink is described, not followed). NotFound when absent.
  virtual absl::StatusOr<FileInfo> StatAt(const Dir& dir, std::string_view name) = 0;
  // The open directory itself.
  virtual absl::StatusOr<FileInfo> StatDir(const Dir& dir) = 0;
  // The names in `dir` (no "." or ".."), in no particular order.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const Dir& dir) = 0;

  // Reads the regular file `name` (never through a symlink) of at most `max_bytes`; `info`
  // (optional) receives what the open descriptor describes. FailedPrecondition for a
  // non-regular or larger file.
  virtual absl::StatusOr<std::string> ReadFileAt(const Dir& dir, std::string_view name,
                                                 size_t max_bytes, FileInfo* info) = 0;
  // Opens the regular file `name` for reading (never through a symlink).
  virtual absl::StatusOr<std::unique_ptr<ReadableFile>> OpenReadAt(const Dir& dir,
                                                                   std::string_view name) = 0;
  // Creates `name` exclusively (O_CREAT|O_EXCL|O_NOFOLLOW) with `mode` for writing.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> CreateExclusiveAt(
      const Dir& dir, std::string_view name, uint32_t mode) = 0;
  // Renames within one directory. With `no_replace`, AlreadyExists when `to` exists
  // (renameat2 RENAME_NOREPLACE) and nothing changes.
  virtual absl::Status RenameAt(const Dir& dir, std::string_view from, std::string_view to,
                                bool no_replace) = 0;
  virtual absl::Status UnlinkAt(const Dir& dir, std::string_view name) = 0;
  // Makes the directory's entries (creations, renames, removals) durable.
  virtual absl::Status SyncDir(const Dir& dir) = 0;

  // Opens the existing regular file `name` (never through a symlink) and takes a flock on it
  // without blocking: Unavailable when a conflicting lock is held.
  virtual absl::StatusOr<std::unique_ptr<FileLock>> LockAt(const Dir& dir, std::string_view name,
                                                           LockMode mode) = 0;

 protected:
  friend class Dir;
  virtual void CloseDir(int handle) = 0;
};

inline Dir& Dir::operator=(Dir&& o) noexcept {
  if (this != &o) {
    if (fs_ != nullptr) fs_->CloseDir(handle_);
    fs_ = o.fs_;
    handle_ = o.handle_;
    o.fs_ = nullptr;
  }
  return *this;
}

inline Dir::~Dir() {
  if (fs_ != nullptr) fs_->CloseDir(handle_);
}

// True for a single path component: non-empty, no '/', no NUL, not "." or "..".
inline bool IsComponent(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

}  // namespace sn::fs

#endif  // SANDBOX_NODE_COMMON_FS_FS_H_

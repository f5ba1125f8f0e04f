// The production Fs: real system calls on directory descriptors (openat, fstatat, renameat2,
// unlinkat) with O_NOFOLLOW everywhere and O_CLOEXEC on every descriptor.
#ifndef SANDBOX_NODE_COMMON_FS_POSIX_FS_H_
#define SANDBOX_NODE_COMMON_FS_POSIX_FS_H_

#include "common/fs/fs.h"

namespace sn::fs {

class PosixFs final : public Fs {
 public:
  // The process-wide instance (stateless).
  static PosixFs* Get();

  // A Dir of this Fs for the open directory descriptor `fd` (taken over: the Dir closes it).
  Dir Adopt(int fd) { return Dir(this, fd); }

  absl::StatusOr<Dir> OpenPath(std::string_view path) override;
  absl::StatusOr<Dir> OpenDirAt(const Dir& parent, std::string_view name) override;
  absl::Status MakeDirAt(const Dir& parent, std::string_view name, uint32_t mode) override;
  absl::StatusOr<FileInfo> StatAt(const Dir& dir, std::string_view name) override;
  absl::StatusOr<FileInfo> StatDir(const Dir& dir) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const Dir& dir) override;
  absl::StatusOr<std::string> ReadFileAt(const Dir& dir, std::string_view name,
                                         size_t max_bytes, FileInfo* info) override;
  absl::StatusOr<std::unique_ptr<ReadableFile>> OpenReadAt(const Dir& dir,
                                                           std::string_view name) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> CreateExclusiveAt(const Dir& dir,
                                                                  std::string_view name,
                                                                  uint32_t mode) override;
  absl::Status RenameAt(const Dir& dir, std::string_view from, std::string_view to,
                        bool no_replace) override;
  absl::Status UnlinkAt(const Dir& dir, std::string_view name) override;
  absl::Status SyncDir(const Dir& dir) override;
  absl::StatusOr<std::unique_ptr<FileLock>> LockAt(const Dir& dir, std::string_view name,
                                                   LockMode mode) override;

 protected:
  void CloseDir(int handle) override;
};

}  // namespace sn::fs

#endif  // SANDBOX_NODE_COMMON_FS_POSIX_FS_H_

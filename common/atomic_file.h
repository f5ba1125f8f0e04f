// Durable publication of small files: write a temporary file in the same directory, fsync it,
// rename it over the target, fsync the directory. A crash at any point leaves either the old
// or the new complete contents (see docs/formats.md).
#ifndef SANDBOX_NODE_COMMON_ATOMIC_FILE_H_
#define SANDBOX_NODE_COMMON_ATOMIC_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sn {

// REQUIRES: the parent directory of `path` exists. `mode` is applied to the new file.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents,
                                 int mode = 0600);

// Reads a whole regular file of at most `max_bytes`. NotFound when it does not exist;
// FailedPrecondition when it is not a regular file or is larger than `max_bytes`.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes = 1 << 20);

// fsyncs a directory.
absl::Status SyncDirectory(const std::string& dir);

// Creates `dir` (and parents) when missing, each one it creates with exactly `mode` whatever
// the process's umask (privhelper's unit has UMask=0077, and qemu, as a VM's uid, must
// traverse the microVM store's 0755 directories). Existing directories are left as they are.
absl::Status MakeDirs(const std::string& dir, int mode = 0700);

// absl::Status from errno with a message naming the operation and path.
absl::Status ErrnoStatus(int err, std::string_view what);

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_ATOMIC_FILE_H_

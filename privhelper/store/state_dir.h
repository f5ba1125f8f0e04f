// privhelper's state directory on the filesystem seam (common/fs): the first Dir of its store.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_STATE_DIR_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_STATE_DIR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/fs/posix_fs.h"

namespace sn::privhelper::store {

using fs::PosixFs;

// Opens privhelper's state directory `path` on `fs`. Its parent must be a trusted directory
// (safe_dir.h: root controls every step of the path, nothing is followed); the last component
// is created (0700, durably) when missing, and must be a directory owned by `owner` with mode
// exactly 0700. Its entries are made durable before it returns (fs/durable.h: nothing a crash
// can take back is adopted). FailedPrecondition names the directory and the rule.
absl::StatusOr<fs::Dir> OpenStateDir(fs::PosixFs& fs, const std::string& path, uint32_t owner);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_STATE_DIR_H_

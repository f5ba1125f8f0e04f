#include "privhelper/store/state_dir.h"

#include <fcntl.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "privhelper/store/safe_dir.h"

namespace sn::privhelper::store {

absl::StatusOr<fs::Dir> OpenStateDir(fs::PosixFs& posix, const std::string& path,
                                     uint32_t owner) {
  absl::StatusOr<std::pair<std::string, std::string>> split = SplitParent(path);
  if (!split.ok()) return split.status();
  absl::StatusOr<OwnedFd> trusted = OpenTrustedDirectory(split->first);
  if (!trusted.ok()) return trusted.status();
  // The trusted descriptor is O_PATH; a readable one is needed to sync and list.
  int fd = openat(trusted->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", split->first));
  fs::Dir parent = posix.Adopt(fd);
  const std::string& name = split->second;
  absl::StatusOr<fs::FileInfo> info = posix.StatAt(parent, name);
  if (absl::IsNotFound(info.status())) {
    if (absl::Status s = posix.MakeDirAt(parent, name, 0700); !s.ok()) return s;
    if (absl::Status s = posix.SyncDir(parent); !s.ok()) return s;
  } else if (!info.ok()) {
    return info.status();
  }
  absl::StatusOr<fs::Dir> dir = posix.OpenDirAt(parent, name);
  if (!dir.ok()) return dir.status();
  absl::StatusOr<fs::FileInfo> self = posix.StatDir(*dir);
  if (!self.ok()) return self.status();
  if (self->uid != owner || (self->mode & 07777) != 0700) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state_dir ", path, " must be a directory owned by uid ", owner,
        " with mode 0700 (it has uid ", self->uid, ", mode 0", absl::Hex(self->mode), ")"));
  }
  // Its entries durable before any is read (fs/durable.h: nothing not durable is adopted).
  if (absl::Status s = posix.SyncDir(*dir); !s.ok()) return s;
  return dir;
}

}  // namespace sn::privhelper::store

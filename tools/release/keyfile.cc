#include "tools/release/keyfile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "tools/release/files.h"

namespace sn::release_tool {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::StatusOr<std::string> CreatePrivateKeyFile(const std::string& path) {
  if (BaseName(path).empty()) return absl::InvalidArgumentError("--private-key names no file");
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(path + " exists; keygen never overwrites a key");
  }
  absl::StatusOr<release::PrivateKey> key = release::PrivateKey::Generate();
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> pem = key->ToPem();
  if (!pem.ok()) return pem.status();
  std::random_device rd;
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid(), ".", rd());
  absl::Status st_write = WriteNewFile(tmp, *pem, 0600);
  if (!st_write.ok()) return st_write;
  if (link(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    if (err == EEXIST) {
      return absl::AlreadyExistsError(path + " exists; keygen never overwrites a key");
    }
    return ErrnoStatus(err, "link " + path);
  }
  unlink(tmp.c_str());
  absl::Status synced = SyncDirectory(DirOf(path));
  if (!synced.ok()) return synced;
  return key->public_key().Base64();
}

absl::StatusOr<release::PrivateKey> ReadPrivateKeyFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, "open private key " + path);
  struct stat st;
  const int rc = fstat(fd, &st);
  close(fd);
  if (rc != 0) return ErrnoStatus(errno, "stat private key " + path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "private key %s has mode %04o: group and others must have no access (chmod 600)", path,
        st.st_mode & 07777));
  }
  absl::StatusOr<std::string> pem = ReadSmallFile(path, kMaxKeyFileBytes);
  if (!pem.ok()) return pem.status();
  return release::PrivateKey::FromPem(*pem);
}

}  // namespace sn::release_tool

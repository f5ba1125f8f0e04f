#include "common/release/artifact.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/release/failure.h"

namespace sn::release {
namespace {

constexpr size_t kChunkBytes = 64 * 1024;

}  // namespace

ArtifactVerifier::ArtifactVerifier(const wire::RuntimeArtifact& expected)
    : expected_(expected) {}

absl::Status ArtifactVerifier::Update(std::string_view bytes) {
  if (failed_) return ChecksumFailure(absl::StrCat("artifact ", expected_.name, " already failed"));
  if (static_cast<uint64_t>(bytes.size()) > static_cast<uint64_t>(expected_.size - seen_)) {
    failed_ = true;
    return ChecksumFailure(absl::StrCat("artifact ", expected_.name, " is longer than its ",
                                        expected_.size, " declared bytes"));
  }
  hash_.Update(bytes);
  seen_ += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::Status ArtifactVerifier::Finish() {
  if (failed_) return ChecksumFailure(absl::StrCat("artifact ", expected_.name, " already failed"));
  failed_ = true;  // spent either way
  if (seen_ != expected_.size) {
    return ChecksumFailure(absl::StrCat("artifact ", expected_.name, " has ", seen_,
                                        " bytes, the manifest declares ", expected_.size));
  }
  if (hash_.FinishHex() != expected_.sha256) {
    return ChecksumFailure(
        absl::StrCat("artifact ", expected_.name, " does not have the declared SHA-256"));
  }
  return absl::OkStatus();
}

absl::Status VerifyOpenFile(int fd, const wire::RuntimeArtifact& expected) {
  ArtifactVerifier v(expected);
  std::vector<char> buf(kChunkBytes);
  off_t offset = 0;
  for (;;) {
    const ssize_t n = pread(fd, buf.data(), buf.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, absl::StrCat("read artifact ", expected.name));
    if (n == 0) break;
    offset += n;
    absl::Status st = v.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!st.ok()) return st;
  }
  return v.Finish();
}

absl::Status VerifyFile(const std::string& path, const wire::RuntimeArtifact& expected) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) return absl::FailedPreconditionError(path + " is a symbolic link");
    return ErrnoStatus(errno, "open " + path);
  }
  absl::Cleanup closer = [fd] { close(fd); };
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return absl::FailedPreconditionError(path + " is not a regular file");
  return VerifyOpenFile(fd, expected);
}

}  // namespace sn::release

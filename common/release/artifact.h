// Streaming verification of one artifact's bytes against the entry a verified manifest
// declares (verify.h): size and SHA-256, without ever holding the artifact in memory.
//
// Feed the bytes in order with Update (a resumed download feeds the part already on disk
// first, then the rest); call Finish once the stream ended cleanly. More bytes than declared
// fail at once; fewer, or another digest, fail at Finish. Both are checksum failures
// (failure.h). A stream that broke is the caller's transfer failure, not the verifier's.
// Thread-compatible: one verifier per stream.
#ifndef SANDBOX_NODE_COMMON_RELEASE_ARTIFACT_H_
#define SANDBOX_NODE_COMMON_RELEASE_ARTIFACT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/sha256.h"
#include "common/wire/http_bodies.h"

namespace sn::release {

class ArtifactVerifier {
 public:
  explicit ArtifactVerifier(const wire::RuntimeArtifact& expected);

  // Checksum failure (and the verifier is spent) when the total exceeds the declared size.
  absl::Status Update(std::string_view bytes);
  // Checksum failure unless exactly the declared size arrived with the declared digest.
  // Call once.
  absl::Status Finish();

  int64_t bytes_seen() const { return seen_; }
  int64_t expected_size() const { return expected_.size; }

 private:
  wire::RuntimeArtifact expected_;
  Sha256Stream hash_;
  int64_t seen_ = 0;
  bool failed_ = false;
};

// Reads the regular file `fd` from offset 0 through an ArtifactVerifier (64 KiB at a time).
// Checksum failure for other bytes; an I/O error is returned without a class.
absl::Status VerifyOpenFile(int fd, const wire::RuntimeArtifact& expected);

// Opens `path` (O_NOFOLLOW: a symlink is refused; it must be a regular file) and verifies it.
// NotFound when it does not exist; FailedPrecondition (no class) when it is not a regular file.
absl::Status VerifyFile(const std::string& path, const wire::RuntimeArtifact& expected);

}  // namespace sn::release

#endif  // SANDBOX_NODE_COMMON_RELEASE_ARTIFACT_H_

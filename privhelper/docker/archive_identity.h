// The image a `docker save` archive produces, derived from the archive's own bytes. Its
// manifest.json names the image's config blob; the daemon's image ID for the loaded image is the
// SHA-256 of that blob's bytes ("sha256:<hex>", the config identity), and the config pins every
// layer by its diff ID, which the daemon checks on load. So the config identity derived here is
// exactly the image the archive produces, and a daemon image with that ID is that image.
//
// The reading is strict where the daemon's reading could differ from ours: manifest.json must
// name exactly one image and its members once each; the config must be a regular file reached
// through no link; a name (after removing "." components) appears once; a name with ".." or an
// absolute one, a sparse file, a base-256 size or a bad header checksum refuses the archive.
// Bounded: at most kMaxArchiveEntries entries, manifest.json at most 1 MiB, a PAX or GNU
// long-name record at most 64 KiB, the config at most 8 MiB. Entries are read in one pass; the
// content of an entry over the config bound is skipped, never hashed.
#ifndef SANDBOX_NODE_PRIVHELPER_DOCKER_ARCHIVE_IDENTITY_H_
#define SANDBOX_NODE_PRIVHELPER_DOCKER_ARCHIVE_IDENTITY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace sn::docker {

inline constexpr size_t kMaxArchiveEntries = 10000;
inline constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxConfigBytes = uint64_t{8} << 20;

// A sequential view of the archive: `read` fills up to n bytes (0 at the end); `skip`, when
// set, advances n bytes without reading them (an lseek on a file), else skipped bytes are read.
struct ArchiveSource {
  std::function<absl::StatusOr<size_t>(char* buf, size_t n)> read;
  std::function<absl::Status(uint64_t n)> skip;
};

// "sha256:<hex>" of the config blob the archive's manifest.json names. InvalidArgument (with
// a message naming the rule, never archive text) for an archive that breaks the rules above;
// the source's own errors as they are.
absl::StatusOr<std::string> ArchiveConfigIdentity(const ArchiveSource& source);

}  // namespace sn::docker

#endif  // SANDBOX_NODE_PRIVHELPER_DOCKER_ARCHIVE_IDENTITY_H_

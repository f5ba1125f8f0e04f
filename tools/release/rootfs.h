// `release rootfs`: the file-system image (ext4) a release ships as its microVM root file
// system, built at publication time so a node never unpacks container layers as root. The
// image's identity is the SHA-256 of its bytes, so the same input always gives the same bytes
// (tools/release/README.md, "rootfs"):
//   - from a `docker save` archive: its layers applied in order, as root, into a throwaway
//     directory (rootfs_docker.h, rootfs_layer.h), every atime/mtime then set to the epoch;
//   - from a directory: the tree as it is (never modified);
// then mke2fs -d and a debugfs pass with every parameter and every time fixed
// (rootfs_ext4.h). The image is written inside the throwaway directory `.rootfs-XXXXXX` beside
// the output (same file system), fsynced, renamed to the output and the directory fsynced: a
// crash never leaves a partial image at the output. The throwaway directory is removed
// whatever happens (an error, SIGINT, SIGTERM or SIGHUP); only SIGKILL or a crash leaves it.
#ifndef SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_H_
#define SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sn::release_tool {

// Without SOURCE_DATE_EPOCH every time in the image is 1970-01-01T00:00:01Z (not 0: e2fsprogs
// reads E2FSPROGS_FAKE_TIME=0 as "unset" and would write the clock into the superblock).
inline constexpr int64_t kDefaultRootfsEpoch = 1;
inline constexpr int64_t kMaxRootfsEpoch = 2147483647;
inline constexpr uint64_t kMinRootfsSizeMib = 4;
inline constexpr uint64_t kMaxRootfsSizeMib = uint64_t{1} << 20;  // 1 TiB

struct RootfsRequest {
  std::string output;
  std::optional<std::string> docker_archive;
  std::optional<std::string> image;  // a RepoTag of the archive
  std::optional<std::string> dir;
  std::optional<uint64_t> size_mib;  // else computed from the tree
  int64_t epoch = kDefaultRootfsEpoch;
};

struct RootfsResult {
  std::string sha256;  // lowercase hex of the image's bytes
  uint64_t size = 0;   // bytes
};

// The epoch from SOURCE_DATE_EPOCH (decimal seconds, 1 to kMaxRootfsEpoch) or the default.
// InvalidArgument for another value.
absl::StatusOr<int64_t> RootfsEpochFromEnvironment();

// --size-mib: decimal, kMinRootfsSizeMib to kMaxRootfsSizeMib. InvalidArgument otherwise.
absl::StatusOr<uint64_t> ParseRootfsSizeMib(std::string_view text);

// The request's usage rules (InvalidArgument): --output, and exactly one of --docker-archive
// and --dir; --image only with --docker-archive.
absl::Status ValidateRootfsRequest(const RootfsRequest& r);

// Builds the image. PermissionDenied when --docker-archive runs without root; Aborted when
// interrupted by a signal; FailedPrecondition for input that is refused (a hostile layer, an
// ambiguous archive, a tree that does not fit); other codes for local errors. On any error
// nothing was written at the output.
absl::StatusOr<RootfsResult> BuildRootfs(const RootfsRequest& r);

}  // namespace sn::release_tool

#endif  // SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_H_

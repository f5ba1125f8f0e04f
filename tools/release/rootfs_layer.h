// Applying one image layer (a tar, read with libarchive) to the tree `release rootfs` builds
// (tools/release/rootfs.h), as a container engine stacks layers:
//   - `DIR/.wh.NAME` deletes DIR/NAME of the lower layers (an entry of the same layer stays);
//   - `DIR/.wh..wh..opq` makes DIR opaque: what the lower layers put below it goes, what this
//     layer puts there (before or after the marker) stays;
//   - other `.wh..wh.*` names (AUFS metadata) are ignored; no whiteout name is ever extracted;
//   - an entry replaces what is at its path, except that a directory over a directory merges;
//   - every other entry is extracted with archive_write_disk: numeric owner and group (never
//     names), all mode bits (setuid, setgid, sticky included), symlinks, hard links, device
//     nodes and fifos; SECURE_NODOTDOT | SECURE_SYMLINKS | SECURE_NOABSOLUTEPATHS, and our own
//     checks before anything is removed: an absolute name, a ".." component or a path through
//     a symbolic link refuses the layer, naming the entry;
//   - the layer's root entry ("./") is skipped: mke2fs makes the image's root 0755 root:root.
// The process's working directory must be the tree's root while a layer is applied
// (archive_write_disk resolves names against it). Bounded by an ExtractBudget shared by all
// layers of an image.
#ifndef SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_LAYER_H_
#define SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_LAYER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"

struct archive;

namespace sn::release_tool::rootfs {

// Across all layers of an image: entries read (whiteouts included) and file bytes written.
inline constexpr uint64_t kMaxLayerEntries = 1'000'000;
inline constexpr uint64_t kMaxLayerBytes = uint64_t{64} << 30;

struct ExtractBudget {
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

// Applies the layer `layer` (named `layer_name` in messages) to the tree at `root_fd`.
// `interrupted` is polled between entries. FailedPrecondition for a layer that is refused.
absl::Status ApplyLayer(struct archive* layer, int root_fd, const std::string& layer_name,
                        ExtractBudget* budget, const std::function<bool()>& interrupted);

}  // namespace sn::release_tool::rootfs

#endif  // SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_LAYER_H_

// The `docker save` archive `release rootfs --docker-archive` reads (tools/release/rootfs.h):
// an uncompressed tar whose manifest.json lists each image's `Config`, `RepoTags` and
// `Layers` (names of members of the archive, each a layer tar, plain or gzip-compressed; a
// member may be a symbolic or hard link to another, as older Docker versions write repeated
// layers). Read with libarchive; bounded: at most kMaxArchiveEntries members, manifest.json
// at most kMaxManifestBytes, at most kMaxLayers layers per image.
#ifndef SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_DOCKER_H_
#define SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_DOCKER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/release/rootfs_tree.h"

struct archive;

namespace sn::release_tool::rootfs {

inline constexpr size_t kMaxArchiveEntries = 10000;
inline constexpr size_t kMaxManifestBytes = size_t{1} << 20;
inline constexpr size_t kMaxLayers = 256;

// One image of manifest.json.
struct SavedImage {
  std::string config;
  std::vector<std::string> repo_tags;
  std::vector<std::string> layers;  // lowest first
};

// The images of a manifest.json. FailedPrecondition for text that is not the documented shape.
absl::StatusOr<std::vector<SavedImage>> ParseSavedManifest(std::string_view json);

// The image `ref` (a RepoTag) names, or the only image when `ref` is unset. FailedPrecondition
// naming the tags when several images and no `ref`, or when no image has tag `ref`.
absl::StatusOr<SavedImage> SelectImage(const std::vector<SavedImage>& images,
                                       const std::optional<std::string>& ref);

class DockerArchive {
 public:
  // Opens the archive, indexes its members and parses manifest.json.
  static absl::StatusOr<DockerArchive> Open(const std::string& path);

  const std::vector<SavedImage>& images() const { return images_; }

  // Checks that `name` is a member (following member links) holding a regular file.
  absl::Status CheckMember(const std::string& name) const;

  // Calls `apply` with a libarchive reader (tar, plain or gzip) over the member `name`.
  absl::Status ReadLayer(const std::string& name,
                         const std::function<absl::Status(struct archive*)>& apply) const;

 private:
  struct Member {
    bool regular = false;
    std::optional<std::string> link;  // the member a symbolic or hard link names (resolved)
  };
  DockerArchive() = default;
  absl::Status Index();
  absl::StatusOr<std::string> Resolve(const std::string& name) const;

  std::string path_;
  UniqueFd fd_;
  std::map<std::string, Member> members_;
  std::string manifest_;
  std::vector<SavedImage> images_;
};

}  // namespace sn::release_tool::rootfs

#endif  // SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_DOCKER_H_

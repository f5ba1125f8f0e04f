// The microVM provider's image store (issue 25, "Settled here" 4 and 8): a root filesystem
// image is a filesystem image (ext4 or erofs) the publisher made (`release rootfs`); its native
// identity is "sha256:" + the SHA-256 of its own bytes, so the store is content-addressed:
//
//   <store_dir>/images/                 root:root 0755 (qemu, as the VM's uid, reads images)
//     sha256-<64 hex>.img               root:root 0444, exactly the bytes whose hash names it
//     .load-<random>                    a Load in progress (0600); removed by Recover()
//
// Load writes to a temporary file while hashing, fsyncs it, makes it 0444, renames it to its
// hash's name and fsyncs the directory: a crash leaves either no image or a whole one (and at
// most a temporary file, which Recover() removes at start). The node never unpacks layers:
// the bytes are stored as they were signed. The native image a generation records is the
// identity itself (Resolve); PathOf answers the file a create boots from. Both answer only for
// a regular file (no symlink) owned by privhelper's euid with mode 0444 and one link; anything
// else there is FailedPrecondition, never a guess.
#ifndef SANDBOX_NODE_PRIVHELPER_MICROVM_IMAGE_STORE_H_
#define SANDBOX_NODE_PRIVHELPER_MICROVM_IMAGE_STORE_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "privhelper/importer.h"

namespace sn::microvm {

// Whether the first bytes of an image (at least kFilesystemMagicBytes of them) are an ext4 or
// an erofs superblock: the magic 0xEF53 at offset 1080 (ext2/3/4) or 0xE0F5E1E2 at 1024.
inline constexpr size_t kFilesystemMagicBytes = 1084;
bool LooksLikeFilesystemImage(std::string_view head);

// How WriteContentFile names and checks what it writes.
struct ContentRules {
  std::string_view what;             // "image", "kernel", ...: in error messages
  std::string_view suffix;           // after "sha256-<hex>" in the file's name
  std::string expected_sha256;       // when not empty, the bytes must hash to it
  // Judges the first kFilesystemMagicBytes (fewer for a shorter file) before the commit.
  std::function<absl::Status(std::string_view head)> check_head;
};

// The store's one way of writing a file (images here, the VM host's staged boot files): the
// `size` bytes of `source` go to a temporary file in `dir` (made 0755 when absent), hashed
// while written; checked (rules); fsynced, made 0444, renamed to "sha256-<hex><suffix>" and the
// directory fsynced: whole or absent. Answers the hex. Failures carry their §7 diagnostic as
// Load's do.
absl::StatusOr<std::string> WriteContentFile(const std::string& dir,
                                             const privhelper::ImageImporter::Source& source,
                                             uint64_t size, const ContentRules& rules);

// Whether `st` is a file WriteContentFile made and nothing changed since: regular, privhelper's
// euid, mode 0444, one link.
bool IsStoreFile(const struct stat& st);

// Removes what an interrupted WriteContentFile left in `dir` (its temporary files).
absl::Status RemoveTemporaryFiles(const std::string& dir);

class MicrovmImageStore final : public privhelper::ImageImporter {
 public:
  // `images_dir` is <store_dir>/images; created (0755) by the first Load.
  explicit MicrovmImageStore(std::string images_dir) : dir_(std::move(images_dir)) {}

  // Removes what an interrupted Load left (.load-* files). Called once at start.
  absl::Status Recover();

  // "sha256:<hex>" of the `size` bytes `source` yields (every byte is read: the identity is
  // the hash of all of them; `skip` is not used). Failures carry their §7 diagnostic
  // (store/prep_failure.h): bytes that are not an ext4 or erofs image, or fewer than `size`,
  // are configuration_invalid; a full disk storage_exhausted; a file in the store that is not
  // the store's own ownership_refused; other system errors provider_unavailable.
  absl::StatusOr<std::string> ArchiveIdentity(const Source& source, const Skip& skip,
                                              uint64_t size) override;
  // Stores the image (see above). Storing an image already held is a no-op that still reads
  // and checks the bytes.
  absl::Status Load(const Source& source, uint64_t size) override;
  // The native image of `identity`: the identity itself (what the generation records, what
  // repair and the start-up check compare with the identity the stored archive produces),
  // once PathOf found its file. NotFound when none is stored.
  absl::StatusOr<std::string> Resolve(const std::string& identity) override;
  // The path of the image file whose identity is `identity` (what a VM boots from), checked as
  // the header says. NotFound when none is stored.
  absl::StatusOr<std::string> PathOf(const std::string& identity) const;
  // Removes the image files of `native_images` (identities or paths Resolve answered); one the
  // store does not hold is skipped. Collection passes only the images no other recorded,
  // not dropped generation holds (GenerationStore::UnsharedNativeImages).
  absl::Status ForgetImages(const std::vector<std::string>& native_images) override;

  // The file name of `identity` ("sha256-<hex>.img"); empty when `identity` is not
  // "sha256:" + 64 lowercase hex digits.
  static std::string FileName(std::string_view identity);

 private:
  const std::string dir_;
};

}  // namespace sn::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_MICROVM_IMAGE_STORE_H_

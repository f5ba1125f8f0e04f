// What preparation and collection ask of a backend's image store, independent of the
// backend: the Docker implementation is privhelper/docker/importer.h; tests substitute fakes. Failures are
// typed with their §7 diagnostic (store/prep_failure.h).
#ifndef SANDBOX_NODE_PRIVHELPER_IMPORTER_H_
#define SANDBOX_NODE_PRIVHELPER_IMPORTER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sn::privhelper {

class ImageImporter {
 public:
  using Source = std::function<absl::StatusOr<size_t>(char* buf, size_t n)>;
  // Advances `n` bytes of a Source without reading them (an lseek on a stored file).
  using Skip = std::function<absl::Status(uint64_t n)>;
  virtual ~ImageImporter() = default;

  // The native identity of the image an archive of `size` bytes produces, derived from the
  // archive's own bytes (read in order from `source`; `skip`, when set, passes over bytes the
  // derivation does not need). Docker: the config identity (the SHA-256 of the config blob
  // manifest.json names, which is the image ID the daemon gives it). InvalidArgument for an
  // archive whose product cannot be told. An image a generation runs is the one its signed
  // archive produces: this identity, never one the backend holds for another reason.
  virtual absl::StatusOr<std::string> ArchiveIdentity(const Source& source, const Skip& skip,
                                                      uint64_t size) = 0;

  // Loads an image archive of `size` bytes, read in order from `source`, into the backend's
  // image store (never held whole in memory).
  virtual absl::Status Load(const Source& source, uint64_t size) = 0;
  // How long one Load may take in all (the overlapped load's waits for the stream count).
  virtual absl::Duration LoadTimeout() const { return absl::Minutes(25); }

  // The backend's immutable native image whose identity is exactly `identity` (as
  // ArchiveIdentity derives it). NotFound when it holds none.
  virtual absl::StatusOr<std::string> Resolve(const std::string& identity) = 0;

  // Collection's native cleanup of a dropped generation's images (their native identities),
  // run once before its release files are removed (the journal records that it finished). A
  // backend whose images belong to a shared daemon removes nothing.
  virtual absl::Status ForgetImages(const std::vector<std::string>& native_images) = 0;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_IMPORTER_H_

// What preparation and collection ask of a backend's image store (issues 9 and 10),
// independent of the backend: the
// Docker implementation is privhelper/docker/importer.h; tests substitute fakes. Failures are
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
  virtual ~ImageImporter() = default;

  // Loads an image archive of `size` bytes, read in order from `source`, into the backend's
  // image store (never held whole in memory).
  virtual absl::Status Load(const Source& source, uint64_t size) = 0;
  // How long one Load may take in all (the overlapped load's waits for the stream count).
  virtual absl::Duration LoadTimeout() const { return absl::Minutes(25); }

  // The backend's immutable native image for the first of `identities` (the specification's
  // order) it holds: a config identity names the image itself, a manifest identity one of its
  // repository digests. NotFound when it holds none of them.
  virtual absl::StatusOr<std::string> Resolve(const std::vector<std::string>& identities) = 0;

  // Collection's native cleanup of a dropped generation's images (their native identities),
  // run once before its release files are removed (the journal records that it finished). A
  // backend whose images belong to a shared daemon removes nothing.
  virtual absl::Status ForgetImages(const std::vector<std::string>& native_images) = 0;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_IMPORTER_H_

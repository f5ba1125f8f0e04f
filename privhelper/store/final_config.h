// A generation's final provider configuration, node/generations/<g>.json (docs/formats.md):
// write-once, published after its lease and identity are durable. Installation, generation,
// digest, provider, release source, each image with its resolved native image, the artifacts
// and the Runtime helper. It names only paths in privhelper's own release store.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_FINAL_CONFIG_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_FINAL_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "privhelper/store/plan.h"

namespace sn::privhelper::store {

inline constexpr size_t kMaxFinalBytes = 256 * 1024;
inline constexpr size_t kMaxImagesDerivedBytes = 4096;

struct HeldImage {
  std::string name;          // what create's "image" names
  std::string artifact;      // the release artifact it was imported from
  std::string native_image;  // Docker: the immutable image id the resolver returned
};

struct HeldGeneration {
  int64_t generation = 0;
  std::string specification_digest;
  std::string source;
  std::vector<HeldImage> images;
  std::vector<PlannedArtifact> artifacts;
  std::string helper_artifact;  // the Runtime helper to run; "" = the host's native helper

  // The native image of `name`, or nullptr when the specification does not name it.
  const std::string* NativeImage(std::string_view name) const;
};

std::string EncodeFinal(const HeldGeneration& h, const std::string& installation,
                        const std::string& provider);
// FailedPrecondition for anything torn, foreign (another installation or provider) or
// malformed; the message says which (common/json/record.h).
absl::StatusOr<HeldGeneration> DecodeFinal(std::string_view text, const std::string& installation,
                                           const std::string& provider);

// node/generations/<g>.images (docs/formats.md): the record that the images of the final
// configuration `final_record` (its exact bytes) were derived from their stored archives, each
// native image being the one its archive produces. Written before the final configuration by
// a preparation, and once at start for a generation published before the derivation existed.
std::string EncodeImagesDerived(int64_t generation, const std::string& installation,
                                std::string_view final_record);
// True iff `text` is exactly that record for this generation, installation and final record.
bool ImagesDerivedRecords(std::string_view text, int64_t generation,
                          const std::string& installation, std::string_view final_record);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_FINAL_CONFIG_H_

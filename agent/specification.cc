#include "agent/specification.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"

namespace sn::agent {

absl::StatusOr<VerifiedSpecification> VerifySpecification(std::string bytes,
                                                          const NodeIdentity& identity) {
  if (Sha256Hex(bytes) != identity.specification_digest) {
    return absl::DataLossError(
        "the specification's SHA-256 differs from the enrolled specification_digest");
  }
  absl::StatusOr<wire::SpecificationDocument> doc = wire::DecodeSpecificationDocument(bytes);
  if (!doc.ok()) {
    return absl::DataLossError(
        absl::StrCat("the specification document is invalid: ", doc.status().message()));
  }
  if (doc->generation != identity.deployment_generation) {
    return absl::DataLossError("the specification names another generation");
  }
  if (doc->provider != identity.provider) {
    return absl::DataLossError("the specification names another provider");
  }
  VerifiedSpecification spec;
  for (const wire::SpecImage& image : doc->images) spec.images.insert(image.name);
  spec.bytes = std::move(bytes);
  return spec;
}

absl::StatusOr<VerifiedSpecification> LoadSpecification(const StateFiles& files,
                                                        const NodeIdentity& identity) {
  const std::string path = files.SpecificationPath(identity.deployment_generation);
  absl::StatusOr<std::string> bytes = ReadSmallFile(path, wire::kMaxHttpBodyBytes);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<VerifiedSpecification> spec = VerifySpecification(*std::move(bytes), identity);
  if (!spec.ok()) return absl::DataLossError(absl::StrCat(path, ": ", spec.status().message()));
  return spec;
}

}  // namespace sn::agent

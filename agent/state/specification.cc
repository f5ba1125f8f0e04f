#include "agent/state/specification.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/fs/durable.h"
#include "common/sha256.h"
#include "common/wire/limits.h"

namespace sn::agent {

absl::StatusOr<VerifiedSpecification> VerifySpecificationBytes(std::string bytes,
                                                               int64_t generation,
                                                               const std::string& digest,
                                                               const std::string& provider) {
  if (Sha256Hex(bytes) != digest) {
    return absl::DataLossError(
        "the specification's SHA-256 differs from the specification_digest Core announced");
  }
  absl::StatusOr<wire::SpecificationDocument> doc = wire::DecodeSpecificationDocument(bytes);
  if (!doc.ok()) {
    return absl::DataLossError(
        absl::StrCat("the specification document is invalid: ", doc.status().message()));
  }
  if (doc->generation != generation) {
    return absl::DataLossError("the specification names another generation");
  }
  if (doc->provider != provider) {
    return absl::DataLossError("the specification names another provider");
  }
  VerifiedSpecification spec;
  for (const wire::SpecImage& image : doc->images) spec.images.insert(image.name);
  spec.document = *std::move(doc);
  spec.bytes = std::move(bytes);
  return spec;
}

absl::StatusOr<VerifiedSpecification> VerifySpecification(std::string bytes,
                                                          const NodeIdentity& identity) {
  return VerifySpecificationBytes(std::move(bytes), identity.deployment_generation,
                                  identity.specification_digest, identity.provider);
}

absl::StatusOr<VerifiedSpecification> LoadSpecificationFor(const StateFiles& files,
                                                           int64_t generation,
                                                           const std::string& digest,
                                                           const std::string& provider) {
  const std::string path = files.SpecificationPath(generation);
  absl::StatusOr<std::string> bytes =
      fs::ReadFilePath(files.filesystem(), path, wire::kMaxHttpBodyBytes);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<VerifiedSpecification> spec =
      VerifySpecificationBytes(*std::move(bytes), generation, digest, provider);
  if (!spec.ok()) return absl::DataLossError(absl::StrCat(path, ": ", spec.status().message()));
  return spec;
}

absl::StatusOr<VerifiedSpecification> LoadSpecification(const StateFiles& files,
                                                        const NodeIdentity& identity) {
  return LoadSpecificationFor(files, identity.deployment_generation,
                              identity.specification_digest, identity.provider);
}

}  // namespace sn::agent

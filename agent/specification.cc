#include "agent/specification.h"

#include <openssl/sha.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"

namespace sn::agent {

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  std::string hex;
  hex.reserve(2 * SHA256_DIGEST_LENGTH);
  for (unsigned char b : digest) {
    char buf[3];
    std::snprintf(buf, sizeof(buf), "%02x", b);
    hex.append(buf, 2);
  }
  return hex;
}

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

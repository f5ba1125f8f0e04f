// Verification of a release's metadata (spec/wire.md §6) as a node receives it: the signature
// over the exact manifest bytes, the manifest's strict decoding and source, and SHA256SUMS
// against the manifest. Every failure here is a provenance failure (failure.h), except the
// specification check, which has no class (the node reports configuration_invalid).
//
// The node calls VerifyRelease once per release it prepares from and then pins every artifact
// to the VerifiedRelease it got (artifact.h), whatever /releases/current says later. The
// publisher (tools/release) calls the same functions on what it is about to publish and on an
// existing release before adding to it. Pure functions, any thread.
#ifndef SANDBOX_NODE_COMMON_RELEASE_VERIFY_H_
#define SANDBOX_NODE_COMMON_RELEASE_VERIFY_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/release/ed25519.h"
#include "common/wire/http_bodies.h"

namespace sn::release {

// manifest.json.sig: canonical base64 of exactly 64 bytes, optionally followed by one "\n".
// Returns the raw signature; provenance failure otherwise.
absl::StatusOr<std::string> DecodeSignatureFile(std::string_view contents);
// base64 of `signature` and "\n".
std::string FormatSignatureFile(std::string_view signature);

struct SumsEntry {
  std::string sha256;  // digest
  std::string name;    // artifact name
  bool operator==(const SumsEntry&) const = default;
};
// SHA256SUMS: lines "<64 lowercase hex>  <artifact name>\n" (two spaces, text mode; the last
// line ends with "\n" too), names strictly ascending in byte order (hence unique), at least one
// line. Provenance failure otherwise.
absl::StatusOr<std::vector<SumsEntry>> ParseSha256Sums(std::string_view contents);
// The SHA256SUMS file of `manifest`: its artifacts sorted by name.
std::string FormatSha256Sums(const wire::ReleaseManifest& manifest);

class VerifiedRelease {
 public:
  // The exact bytes the signature covers.
  const std::string& manifest_bytes() const { return manifest_bytes_; }
  const wire::ReleaseManifest& manifest() const { return manifest_; }
  // The artifact named `name`, or null.
  const wire::RuntimeArtifact* Find(std::string_view name) const;

 private:
  friend absl::StatusOr<VerifiedRelease> VerifyRelease(std::string_view, std::string,
                                                       std::string_view, std::string_view,
                                                       const PublicKey&);
  std::string manifest_bytes_;
  wire::ReleaseManifest manifest_;
};

// Checks, in this order: the manifest's size (kMaxManifestBytes); the signature file; the
// Ed25519 signature by `key` over the exact `manifest_bytes`; the manifest's strict §6 decoding
// (schema 1, source, published_at, 1..256 artifacts of a known kind, unique names); that its
// source is `expected_source` (a node pins the release it asked for); that no artifact is
// named like a metadata file; and that SHA256SUMS lists exactly the manifest's artifacts with
// the same digests. Every failure is a provenance failure.
absl::StatusOr<VerifiedRelease> VerifyRelease(std::string_view expected_source,
                                              std::string manifest_bytes,
                                              std::string_view signature_file,
                                              std::string_view sums_file, const PublicKey& key);

// A specification's runtime against its release: the sources are equal and every artifact the
// specification names is in the manifest with the same kind, digest and size. InvalidArgument
// naming the first disagreement (no failure class: configuration_invalid on a node, 400 in
// devcore's admin API).
absl::Status CheckSpecificationAgainstManifest(const wire::SpecificationDocument& spec,
                                               const wire::ReleaseManifest& manifest);

}  // namespace sn::release

#endif  // SANDBOX_NODE_COMMON_RELEASE_VERIFY_H_

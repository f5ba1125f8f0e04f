// JSON bodies of the machine connection API (spec/wire.md §6), decoded with the same strict
// rules as frames (§2; no type/version members).
#ifndef SANDBOX_NODE_COMMON_WIRE_HTTP_BODIES_H_
#define SANDBOX_NODE_COMMON_WIRE_HTTP_BODIES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sn::wire {

struct EnrollRequest {
  std::string enrollment_token;  // opaque, non-empty, <= 256 bytes
  std::string installation_id;   // uuid
  std::string provider;          // code
  std::string backend_fingerprint;  // <= 256
  int64_t max_active = 1;
  int64_t max_retained = 0;
  bool generation_management = false;  // always present on the wire
  bool operator==(const EnrollRequest&) const = default;
};

struct EnrollResponse {
  std::string node_id;     // uuid
  std::string credential;  // opaque, non-empty, <= 256 bytes; a secret
  int64_t deployment_generation = 0;
  std::string specification_digest;
  std::string runtime_source;  // release source name
  bool operator==(const EnrollResponse&) const = default;
};

struct RuntimeArtifact {
  std::string name;  // [A-Za-z0-9][A-Za-z0-9._-]{0,127}
  // spec: helper|firmware|kernel|seccomp|image; the manifest adds
  // agent|privhelper|native_helper|preparer
  std::string kind;
  std::string sha256;  // digest
  int64_t size = 0;
  bool operator==(const RuntimeArtifact&) const = default;
};

struct SpecImage {
  std::string name;      // <= 128, what create's "image" names
  std::string artifact;  // name of an artifact of kind "image"
  std::vector<std::string> identities;  // 1..4 of "sha256:" + digest
  bool operator==(const SpecImage&) const = default;
};

struct SpecificationDocument {
  int64_t generation = 0;
  std::string provider;
  std::string runtime_source;
  std::vector<RuntimeArtifact> artifacts;  // 0..64, unique names
  std::vector<SpecImage> images;           // 1..16
  bool operator==(const SpecificationDocument&) const = default;
};

struct ReleaseManifest {
  std::string source;
  std::string published_at;  // timestamp
  std::vector<RuntimeArtifact> artifacts;  // 1..256, unique names
  bool operator==(const ReleaseManifest&) const = default;
};

// GET /releases/current (§6): {source}.
struct CurrentRelease {
  std::string source;  // IsReleaseSourceName
  bool operator==(const CurrentRelease&) const = default;
};

// A release source name as §6 allows it: [A-Za-z0-9][A-Za-z0-9._-]{0,63} and never "current"
// (GET /releases/current names the current release, so no release may be called that; rev 4).
// Every decoder below applies it to source members.
bool IsReleaseSourceName(std::string_view s);
// One of the manifest's artifact kinds (§6, rev 4): agent, privhelper, native_helper,
// preparer, helper, firmware, kernel, seccomp, image.
bool IsManifestArtifactKind(std::string_view kind);

absl::StatusOr<EnrollRequest> DecodeEnrollRequest(std::string_view json);
std::string EncodeEnrollRequest(const EnrollRequest& r);
absl::StatusOr<EnrollResponse> DecodeEnrollResponse(std::string_view json);
std::string EncodeEnrollResponse(const EnrollResponse& r);
// Also checks the cross-member rules: image artifacts exist with kind "image".
absl::StatusOr<SpecificationDocument> DecodeSpecificationDocument(std::string_view json);
std::string EncodeSpecificationDocument(const SpecificationDocument& d);
absl::StatusOr<ReleaseManifest> DecodeReleaseManifest(std::string_view json);
std::string EncodeReleaseManifest(const ReleaseManifest& m);
absl::StatusOr<CurrentRelease> DecodeCurrentRelease(std::string_view json);
std::string EncodeCurrentRelease(const CurrentRelease& c);

}  // namespace sn::wire

#endif  // SANDBOX_NODE_COMMON_WIRE_HTTP_BODIES_H_

// The published form of console releases (spec/wire.md §6), shared by the publisher
// (tools/release), the server (devcore) and the node:
//
//   <releases>/current                  one source name and "\n": the current release
//   <releases>/<source>/manifest.json    the manifest, bytes exactly as signed
//   <releases>/<source>/manifest.json.sig base64 of the 64-byte Ed25519 signature, "\n"
//   <releases>/<source>/SHA256SUMS       "<sha256>  <name>\n" per artifact, sorted by name
//   <releases>/<source>/<artifact>       each artifact the manifest names
//
// Source names follow wire::IsReleaseSourceName ("current" is never one). An artifact may not
// be named like a metadata file (the route /releases/<source>/<name> could not tell them
// apart); the verifier refuses such a manifest. Pure functions, any thread.
#ifndef SANDBOX_NODE_COMMON_RELEASE_LAYOUT_H_
#define SANDBOX_NODE_COMMON_RELEASE_LAYOUT_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/wire/limits.h"

namespace sn::release {

inline constexpr std::string_view kCurrentFileName = "current";
inline constexpr std::string_view kManifestFileName = "manifest.json";
inline constexpr std::string_view kSignatureFileName = "manifest.json.sig";
inline constexpr std::string_view kSumsFileName = "SHA256SUMS";

// Bounds of the metadata files, derived from the limits of spec §6.
inline constexpr size_t kMaxManifestBytes = wire::kMaxHttpBodyBytes;
inline constexpr size_t kSignatureBase64Bytes = 88;  // base64 of 64 bytes
inline constexpr size_t kMaxSignatureFileBytes = kSignatureBase64Bytes + 1;  // optional "\n"
inline constexpr size_t kMaxSumsLineBytes = 64 + 2 + wire::kMaxArtifactNameBytes + 1;
inline constexpr size_t kMaxSumsBytes = wire::kMaxManifestArtifacts * kMaxSumsLineBytes;
inline constexpr size_t kMaxCurrentFileBytes = wire::kMaxReleaseSourceBytes + 1;

// True for manifest.json, manifest.json.sig and SHA256SUMS.
bool IsMetadataName(std::string_view name);

// The `current` file: exactly a valid source name followed by one "\n". InvalidArgument
// otherwise (a local file of Core's, not a release failure).
absl::StatusOr<std::string> ParseCurrentFile(std::string_view contents);
std::string FormatCurrentFile(std::string_view source);

}  // namespace sn::release

#endif  // SANDBOX_NODE_COMMON_RELEASE_LAYOUT_H_

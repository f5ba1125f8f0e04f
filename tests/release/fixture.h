// Test helpers for releases: an in-memory signed release (manifest bytes, signature file,
// SHA256SUMS) built with the same encoders the publisher uses, and temporary directories.
#ifndef SANDBOX_NODE_TESTS_RELEASE_FIXTURE_H_
#define SANDBOX_NODE_TESTS_RELEASE_FIXTURE_H_

#include <stdlib.h>

#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/release/signing.h"
#include "common/release/verify.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"

namespace sn::release::testing {

struct ArtifactBytes {
  std::string name;
  std::string kind;
  std::string bytes;
};

inline wire::RuntimeArtifact Describe(const ArtifactBytes& a) {
  return wire::RuntimeArtifact{a.name, a.kind, Sha256Hex(a.bytes),
                               static_cast<int64_t>(a.bytes.size())};
}

struct SignedRelease {
  wire::ReleaseManifest manifest;
  std::string manifest_bytes;
  std::string signature_file;
  std::string sums;
};

inline SignedRelease MakeRelease(const PrivateKey& key, const std::string& source,
                                 const std::vector<ArtifactBytes>& artifacts) {
  SignedRelease r;
  r.manifest.source = source;
  r.manifest.published_at = "2026-11-29T12:00:00Z";
  for (const ArtifactBytes& a : artifacts) r.manifest.artifacts.push_back(Describe(a));
  r.manifest_bytes = wire::EncodeReleaseManifest(r.manifest);
  absl::StatusOr<std::string> sig = key.Sign(r.manifest_bytes);
  EXPECT_TRUE(sig.ok()) << sig.status();
  r.signature_file = FormatSignatureFile(sig.ok() ? *sig : std::string());
  r.sums = FormatSha256Sums(r.manifest);
  return r;
}

inline PrivateKey NewKey() {
  absl::StatusOr<PrivateKey> k = PrivateKey::Generate();
  EXPECT_TRUE(k.ok()) << k.status();
  return *std::move(k);
}

inline std::string MakeTempDir() {
  char tmpl[] = "/tmp/rel-XXXXXX";
  const char* d = mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d == nullptr ? std::string("/tmp") : std::string(d);
}

}  // namespace sn::release::testing

#endif  // SANDBOX_NODE_TESTS_RELEASE_FIXTURE_H_

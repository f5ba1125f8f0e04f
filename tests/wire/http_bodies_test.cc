// The §6 bodies: round trips and the strict rules (same reader as frames).
#include <string>

#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"
#include "gtest/gtest.h"

namespace sn::wire {
namespace {

const std::string kDigest(64, 'c');
constexpr char kU1[] = "0f8fad5b-d9cb-469f-a165-70867728950e";

SpecificationDocument Spec() {
  SpecificationDocument d;
  d.generation = 3;
  d.provider = "docker";
  d.runtime_source = "2026.11.1";
  d.artifacts = {{"python.tar", "image", kDigest, 1234}, {"seccomp.json", "seccomp", kDigest, 0}};
  d.images = {{"python", "python.tar", {"sha256:" + kDigest}}};
  return d;
}

TEST(HttpBodiesTest, EveryBodyRoundTrips) {
  const EnrollRequest er{"tok", kU1, "docker", "fp", 10, 0, true};
  EXPECT_EQ(*DecodeEnrollRequest(EncodeEnrollRequest(er)), er);
  const EnrollResponse rs{kU1, "secret", 1, kDigest, "r1"};
  EXPECT_EQ(*DecodeEnrollResponse(EncodeEnrollResponse(rs)), rs);
  const SpecificationDocument d = Spec();
  absl::StatusOr<SpecificationDocument> d2 = DecodeSpecificationDocument(EncodeSpecificationDocument(d));
  ASSERT_TRUE(d2.ok()) << d2.status();
  EXPECT_EQ(*d2, d);
  const ReleaseManifest m{"r1", "2026-11-29T12:00:00Z", {{"agent", "agent", kDigest, 5}}};
  absl::StatusOr<ReleaseManifest> m2 = DecodeReleaseManifest(EncodeReleaseManifest(m));
  ASSERT_TRUE(m2.ok()) << m2.status();
  EXPECT_EQ(*m2, m);
}

TEST(HttpBodiesTest, EnrollRequestRequiresGenerationManagementAndRejectsUnknownMembers) {
  std::string s = EncodeEnrollRequest({"tok", kU1, "docker", "fp", 10, 0, false});
  std::string missing = s;
  missing.replace(missing.find(",\"generation_management\":false"), 30, "");
  EXPECT_NE(std::string(DecodeEnrollRequest(missing).status().message()).find("missing member 'generation_management'"),
            std::string::npos);
  std::string extra = s;
  extra.insert(1, "\"x\":1,");
  EXPECT_FALSE(DecodeEnrollRequest(extra).ok());
  EXPECT_FALSE(DecodeEnrollRequest(s + "x").ok());
  EXPECT_FALSE(DecodeEnrollRequest(EncodeEnrollRequest({"", kU1, "docker", "fp", 10, 0, false})).ok());
}

TEST(HttpBodiesTest, SpecificationRuntimeKindsAreTheSixOfRevision5) {
  for (const char* kind : {"helper", "guest_agent", "firmware", "kernel", "seccomp", "image"}) {
    SpecificationDocument d = Spec();
    d.artifacts.push_back({"x", kind, kDigest, 7});
    absl::StatusOr<SpecificationDocument> got =
        DecodeSpecificationDocument(EncodeSpecificationDocument(d));
    ASSERT_TRUE(got.ok()) << kind << ": " << got.status();
    EXPECT_EQ(*got, d);
  }
  for (const char* kind : {"native_helper", "agent", "guest-agent", "Guest_agent"}) {
    SpecificationDocument d = Spec();
    d.artifacts.push_back({"x", kind, kDigest, 7});
    EXPECT_FALSE(DecodeSpecificationDocument(EncodeSpecificationDocument(d)).ok()) << kind;
  }
}

TEST(HttpBodiesTest, SpecificationImagesMustNameAnImageArtifact) {
  SpecificationDocument d = Spec();
  d.images[0].artifact = "seccomp.json";
  EXPECT_NE(std::string(DecodeSpecificationDocument(EncodeSpecificationDocument(d)).status().message())
                .find("names no runtime artifact of kind \"image\""),
            std::string::npos);
  d = Spec();
  d.images[0].identities = {kDigest};
  EXPECT_FALSE(DecodeSpecificationDocument(EncodeSpecificationDocument(d)).ok());
  d = Spec();
  d.images.clear();
  EXPECT_FALSE(DecodeSpecificationDocument(EncodeSpecificationDocument(d)).ok());
  d = Spec();
  d.artifacts.push_back(d.artifacts[0]);
  EXPECT_NE(std::string(DecodeSpecificationDocument(EncodeSpecificationDocument(d)).status().message())
                .find("not unique"),
            std::string::npos);
  d = Spec();
  d.artifacts[1].kind = "agent";  // a manifest kind, not a specification kind
  EXPECT_FALSE(DecodeSpecificationDocument(EncodeSpecificationDocument(d)).ok());
}

TEST(HttpBodiesTest, SchemaMustBeTheIntegerOne) {
  std::string s = EncodeSpecificationDocument(Spec());
  s.replace(s.find("\"schema\":1"), 10, "\"schema\":2");
  EXPECT_NE(std::string(DecodeSpecificationDocument(s).status().message()).find("specification.schema"),
            std::string::npos);
}

TEST(HttpBodiesTest, ManifestNeedsAtLeastOneArtifactWithAValidName) {
  EXPECT_FALSE(DecodeReleaseManifest(EncodeReleaseManifest({"r1", "2026-11-29T12:00:00Z", {}})).ok());
  EXPECT_FALSE(DecodeReleaseManifest(
                   EncodeReleaseManifest({"r1", "2026-11-29T12:00:00Z", {{".hidden", "agent", kDigest, 1}}}))
                   .ok());
  EXPECT_FALSE(DecodeReleaseManifest(
                   EncodeReleaseManifest({"-r1", "2026-11-29T12:00:00Z", {{"a", "agent", kDigest, 1}}}))
                   .ok());
}

TEST(HttpBodiesTest, ManifestAcceptsEveryKindOfRevision5IncludingNativeHelperAndGuestAgent) {
  const std::string kinds[] = {"agent",    "privhelper", "native_helper", "preparer",
                               "helper",   "guest_agent", "firmware",     "kernel",
                               "seccomp",  "image"};
  ReleaseManifest m{"r1", "2026-11-29T12:00:00Z", {}};
  for (const std::string& k : kinds) m.artifacts.push_back({"a-" + k, k, kDigest, 1});
  absl::StatusOr<ReleaseManifest> decoded = DecodeReleaseManifest(EncodeReleaseManifest(m));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, m);
  m.artifacts = {{"x", "native-helper", kDigest, 1}};
  EXPECT_FALSE(DecodeReleaseManifest(EncodeReleaseManifest(m)).ok());
}

TEST(HttpBodiesTest, NativeHelperIsNotASpecificationArtifactKind) {
  SpecificationDocument d = Spec();
  d.artifacts[1].kind = "native_helper";
  EXPECT_FALSE(DecodeSpecificationDocument(EncodeSpecificationDocument(d)).ok());
}

TEST(HttpBodiesTest, CurrentIsNeverAReleaseSourceName) {
  EXPECT_FALSE(IsReleaseSourceName("current"));
  EXPECT_TRUE(IsReleaseSourceName("Current"));
  EXPECT_TRUE(IsReleaseSourceName("current-2"));
  EXPECT_FALSE(IsReleaseSourceName(""));
  EXPECT_FALSE(IsReleaseSourceName(std::string(65, 'a')));
  EXPECT_TRUE(IsReleaseSourceName(std::string(64, 'a')));
  EXPECT_FALSE(DecodeReleaseManifest(
                   EncodeReleaseManifest({"current", "2026-11-29T12:00:00Z", {{"a", "agent", kDigest, 1}}}))
                   .ok());
  SpecificationDocument d = Spec();
  d.runtime_source = "current";
  EXPECT_FALSE(DecodeSpecificationDocument(EncodeSpecificationDocument(d)).ok());
  EXPECT_FALSE(DecodeEnrollResponse(EncodeEnrollResponse({kU1, "secret", 1, kDigest, "current"})).ok());
}

TEST(HttpBodiesTest, CurrentReleaseBodyIsExactlyOneSource) {
  absl::StatusOr<CurrentRelease> c = DecodeCurrentRelease(EncodeCurrentRelease({"2026.11.1"}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, "2026.11.1");
  EXPECT_EQ(EncodeCurrentRelease({"r1"}), "{\"source\":\"r1\"}");
  EXPECT_FALSE(DecodeCurrentRelease("{\"source\":\"current\"}").ok());
  EXPECT_FALSE(DecodeCurrentRelease("{}").ok());
  EXPECT_FALSE(DecodeCurrentRelease("{\"source\":\"r1\",\"source\":\"r1\"}").ok());
  EXPECT_FALSE(DecodeCurrentRelease("{\"source\":\"r1\",\"x\":1}").ok());
  EXPECT_FALSE(DecodeCurrentRelease("{\"source\":null}").ok());
}

TEST(HttpBodiesTest, ManifestArtifactKindsAreExactlyTheTenOfRevision5) {
  for (std::string_view k : {"agent", "privhelper", "native_helper", "preparer", "helper",
                             "guest_agent", "firmware", "kernel", "seccomp", "image"}) {
    EXPECT_TRUE(IsManifestArtifactKind(k)) << k;
  }
  for (std::string_view k : {"", "Agent", "native-helper", "guest-agent", "current", "images"}) {
    EXPECT_FALSE(IsManifestArtifactKind(k)) << k;
  }
}

TEST(HttpBodiesTest, BodiesOverTheLimitAreTooLarge) {
  std::string s = EncodeEnrollResponse({kU1, "secret", 1, kDigest, "r1"});
  s.append(kMaxHttpBodyBytes, ' ');
  EXPECT_EQ(DecodeEnrollResponse(s).status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace sn::wire

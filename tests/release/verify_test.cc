// common/release: signature, manifest, SHA256SUMS and specification checks, each failure
// with its class.
#include "common/release/verify.h"

#include <string>

#include "common/json/base64.h"
#include "common/release/failure.h"
#include "common/release/layout.h"
#include "gtest/gtest.h"
#include "tests/release/fixture.h"

namespace sn::release::testing {
namespace {

class VerifyTest : public ::testing::Test {
 protected:
  PrivateKey key_ = NewKey();
  std::vector<ArtifactBytes> artifacts_ = {{"python.tar", "image", "image bytes"},
                                           {"helper", "helper", "helper bytes"},
                                           {"node-helper", "native_helper", "native"}};
  SignedRelease rel_ = MakeRelease(key_, "2026.11.1", artifacts_);

  absl::StatusOr<VerifiedRelease> Verify(const SignedRelease& r,
                                         const std::string& source = "2026.11.1") {
    return VerifyRelease(source, r.manifest_bytes, r.signature_file, r.sums, key_.public_key());
  }
};

bool IsProvenance(const absl::Status& st) {
  return FailureClassOf(st) == FailureClass::kProvenance;
}

TEST_F(VerifyTest, ASignedConsistentReleaseVerifiesAndFindsItsArtifacts) {
  absl::StatusOr<VerifiedRelease> v = Verify(rel_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->manifest_bytes(), rel_.manifest_bytes);
  EXPECT_EQ(v->manifest().artifacts.size(), 3u);
  ASSERT_NE(v->Find("node-helper"), nullptr);
  EXPECT_EQ(v->Find("node-helper")->kind, "native_helper");
  EXPECT_EQ(v->Find("absent"), nullptr);
}

TEST_F(VerifyTest, SignatureFileWithoutTrailingNewlineVerifiesToo) {
  rel_.signature_file.pop_back();
  EXPECT_TRUE(Verify(rel_).ok());
}

TEST_F(VerifyTest, SignatureByAnotherKeyIsAProvenanceFailure) {
  PrivateKey other = NewKey();
  SignedRelease r = MakeRelease(other, "2026.11.1", artifacts_);
  absl::Status st = Verify(r).status();
  EXPECT_TRUE(IsProvenance(st)) << st;
}

TEST_F(VerifyTest, AManifestChangedByOneByteAfterSigningIsAProvenanceFailure) {
  // A semantically equal manifest with other bytes (whitespace) is not what was signed.
  rel_.manifest_bytes.push_back(' ');
  EXPECT_TRUE(IsProvenance(Verify(rel_).status()));
}

TEST_F(VerifyTest, MalformedSignatureFilesAreProvenanceFailures) {
  for (std::string bad : {std::string(""), rel_.signature_file + "\n",
                          "\n" + rel_.signature_file, rel_.signature_file.substr(0, 87) + "\n",
                          json::Base64Encode(std::string(63, 'x')) + "\n",
                          json::Base64Encode(std::string(65, 'x')) + "\n",
                          rel_.signature_file.substr(0, 44) + " " +
                              rel_.signature_file.substr(45)}) {
    SignedRelease r = rel_;
    r.signature_file = bad;
    EXPECT_TRUE(IsProvenance(Verify(r).status())) << bad;
  }
}

TEST_F(VerifyTest, ASignedManifestThatFailsTheSpecIsAProvenanceFailure) {
  SignedRelease r = rel_;
  r.manifest_bytes = "{\"schema\":2}";
  r.signature_file = FormatSignatureFile(*key_.Sign(r.manifest_bytes));
  EXPECT_TRUE(IsProvenance(Verify(r).status()));
}

TEST_F(VerifyTest, AManifestOfAnotherSourceIsAProvenanceFailure) {
  absl::Status st = Verify(rel_, "2026.11.2").status();
  EXPECT_TRUE(IsProvenance(st)) << st;
}

TEST_F(VerifyTest, AnArtifactNamedLikeMetadataIsAProvenanceFailure) {
  for (const char* name : {"manifest.json", "manifest.json.sig", "SHA256SUMS"}) {
    SignedRelease r = MakeRelease(key_, "2026.11.1", {{name, "agent", "x"}});
    EXPECT_TRUE(IsProvenance(Verify(r).status())) << name;
  }
}

TEST_F(VerifyTest, Sha256SumsThatDisagreeWithTheManifestAreProvenanceFailures) {
  const std::string good = rel_.sums;
  std::vector<std::string> bad = {
      "",                                                       // empty
      good.substr(0, good.find('\n') + 1),                      // a line missing
      good + std::string(64, 'd') + "  zzz\n",                  // an extra artifact
      good.substr(0, good.size() - 1),                          // no final newline
  };
  std::string wrong_digest = good;
  wrong_digest[0] = wrong_digest[0] == 'a' ? 'b' : 'a';
  bad.push_back(wrong_digest);
  std::string binary_mode = good;
  binary_mode.replace(64, 2, " *");
  bad.push_back(binary_mode);
  std::string upper = good;
  for (size_t i = 0; i < 64; ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  if (upper != good) bad.push_back(upper);
  // Unsorted: the same lines in reverse order.
  std::vector<std::string> lines;
  for (size_t pos = 0; pos < good.size();) {
    const size_t nl = good.find('\n', pos);
    lines.push_back(good.substr(pos, nl + 1 - pos));
    pos = nl + 1;
  }
  bad.push_back(lines[2] + lines[1] + lines[0]);
  bad.push_back(lines[0] + lines[0] + lines[1] + lines[2]);  // duplicate
  for (const std::string& sums : bad) {
    SignedRelease r = rel_;
    r.sums = sums;
    absl::Status st = Verify(r).status();
    EXPECT_TRUE(IsProvenance(st)) << "sums:\n" << sums << "\n" << st;
  }
}

TEST_F(VerifyTest, Sha256SumsIsSortedByNameAndParsesBack) {
  absl::StatusOr<std::vector<SumsEntry>> sums = ParseSha256Sums(rel_.sums);
  ASSERT_TRUE(sums.ok()) << sums.status();
  ASSERT_EQ(sums->size(), 3u);
  EXPECT_EQ((*sums)[0].name, "helper");
  EXPECT_EQ((*sums)[1].name, "node-helper");
  EXPECT_EQ((*sums)[2].name, "python.tar");
  EXPECT_EQ((*sums)[2].sha256, Sha256Hex("image bytes"));
  EXPECT_EQ(rel_.sums.substr(0, 66), Sha256Hex("helper bytes") + "  ");
}

TEST_F(VerifyTest, SpecificationMustNameArtifactsExactlyAsTheManifestDeclaresThem) {
  absl::StatusOr<VerifiedRelease> v = Verify(rel_);
  ASSERT_TRUE(v.ok());
  wire::SpecificationDocument spec;
  spec.generation = 2;
  spec.provider = "docker";
  spec.runtime_source = "2026.11.1";
  spec.artifacts = {Describe(artifacts_[0]), Describe(artifacts_[1])};
  spec.images = {{"python", "python.tar", {"sha256:" + std::string(64, 'e')}}};
  EXPECT_TRUE(CheckSpecificationAgainstManifest(spec, v->manifest()).ok());

  wire::SpecificationDocument other_source = spec;
  other_source.runtime_source = "2026.11.2";
  wire::SpecificationDocument missing = spec;
  missing.artifacts.push_back({"seccomp.json", "seccomp", std::string(64, 'f'), 3});
  wire::SpecificationDocument wrong_size = spec;
  wrong_size.artifacts[0].size += 1;
  wire::SpecificationDocument wrong_digest = spec;
  wrong_digest.artifacts[1].sha256 = std::string(64, '0');
  for (const auto* bad : {&other_source, &missing, &wrong_size, &wrong_digest}) {
    absl::Status st = CheckSpecificationAgainstManifest(*bad, v->manifest());
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_FALSE(FailureClassOf(st).has_value()) << "a specification mismatch is not a download failure";
  }
}

TEST(PublicKeyTest, OnlyCanonicalBase64OfThirtyTwoBytesIsAKey) {
  PrivateKey key = NewKey();
  const std::string b64 = key.public_key().Base64();
  EXPECT_EQ(b64.size(), 44u);
  absl::StatusOr<PublicKey> parsed = PublicKey::FromBase64(b64);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->raw(), key.public_key().raw());
  for (std::string bad : {std::string(""), b64 + "\n", b64.substr(0, 43),
                          json::Base64Encode(std::string(31, 'k')),
                          json::Base64Encode(std::string(33, 'k'))}) {
    absl::StatusOr<PublicKey> k = PublicKey::FromBase64(bad);
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_FALSE(FailureClassOf(k.status()).has_value());
  }
}

TEST(PrivateKeyTest, PemRoundTripKeepsTheKeyAndItsSignaturesVerify) {
  PrivateKey key = NewKey();
  absl::StatusOr<std::string> pem = key.ToPem();
  ASSERT_TRUE(pem.ok());
  EXPECT_EQ(pem->rfind("-----BEGIN PRIVATE KEY-----", 0), 0u);
  absl::StatusOr<PrivateKey> back = PrivateKey::FromPem(*pem);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->public_key().raw(), key.public_key().raw());
  absl::StatusOr<std::string> sig = back->Sign("message");
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->size(), 64u);
  EXPECT_TRUE(key.public_key().Verify("message", *sig));
  EXPECT_FALSE(key.public_key().Verify("messagE", *sig));
  EXPECT_FALSE(PrivateKey::FromPem("not a key").ok());
}

TEST(LayoutTest, CurrentFileIsOneSourceNameAndOneNewline) {
  EXPECT_EQ(FormatCurrentFile("r1"), "r1\n");
  EXPECT_EQ(*ParseCurrentFile("r1\n"), "r1");
  for (const char* bad : {"r1", "r1\n\n", "\n", "current\n", "r 1\n", " r1\n", ""}) {
    EXPECT_FALSE(ParseCurrentFile(bad).ok()) << bad;
  }
}

TEST(FailureTest, OnlyStatusesMadeAsReleaseFailuresHaveAClass) {
  EXPECT_EQ(FailureClassOf(ProvenanceFailure("p")), FailureClass::kProvenance);
  EXPECT_EQ(FailureClassOf(TransferFailure("t")), FailureClass::kTransfer);
  EXPECT_EQ(FailureClassOf(ChecksumFailure("c")), FailureClass::kChecksum);
  EXPECT_EQ(ProvenanceFailure("p").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(TransferFailure("t").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ChecksumFailure("c").code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(FailureClassOf(absl::OkStatus()).has_value());
  EXPECT_FALSE(FailureClassOf(absl::DataLossError("c")).has_value());
  EXPECT_FALSE(FailureClassOf(absl::UnavailableError("t")).has_value());
  EXPECT_EQ(FailureClassName(FailureClass::kChecksum), "checksum");
}

}  // namespace
}  // namespace sn::release::testing

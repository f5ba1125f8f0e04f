// One preparation attempt (prepare.h) against an in-memory Core and an in-process gRPC
// privhelper (through the production client, privhelper_preparation.h): the happy path, and
// every hostile input refused with the right diagnostic and nothing sent to privhelper after
// the refusal.
#include "agent/generations/prepare.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "agent/generations/privhelper_preparation.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "proto/execute_stream.h"
#include "tests/agent/fakes/fake_core.h"
#include "tests/agent/fakes/fake_privhelper.h"
#include "tests/release/fixture.h"

namespace sn::agent {
namespace {

using release::testing::ArtifactBytes;
using release::testing::MakeRelease;
using release::testing::NewKey;
using release::testing::SignedRelease;
using testing::FakeCore;
using testing::FakePrivhelperServer;

constexpr int64_t kGeneration = 2;

std::string Bytes(size_t n, char seed) {
  std::string s(n, '\0');
  uint32_t x = static_cast<uint8_t>(seed) * 2654435761u + 1;
  for (char& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

class PrepareTest : public ::testing::Test {
 protected:
  PrepareTest()
      : key_(NewKey()),
        privhelper_(key_.public_key()),
        client_(privhelper_.socket, absl::Seconds(20), absl::Seconds(20)) {
    image_ = {"image.tar", "image", Bytes(600 * 1024 + 7, 'i')};
    profile_ = {"profile.json", "seccomp", "{\"defaultAction\":\"SCMP_ACT_ERRNO\"}"};
    Publish("rt-1", {image_, profile_});
    spec_doc_.generation = kGeneration;
    spec_doc_.provider = "docker";
    spec_doc_.runtime_source = "rt-1";
    spec_doc_.artifacts = {release::testing::Describe(image_),
                           release::testing::Describe(profile_)};
    spec_doc_.images.push_back({"busybox", "image.tar", {"sha256:" + std::string(64, '5')}});
    SetSpec(wire::EncodeSpecificationDocument(spec_doc_));
    context_.core = &core_;
    context_.privhelper = &client_;
    public_key_ = key_.public_key();
    context_.release_key = &*public_key_;
    context_.provider = "docker";
    context_.store_specification = [this](int64_t g, const std::string& bytes) {
      stored_.push_back({g, bytes});
      privhelper_calls_at_store_ = privhelper_.service.calls().size();
      return absl::OkStatus();
    };
  }

  // Publishes a release in the fake Core (signed with the node's key unless `signer`).
  SignedRelease Publish(const std::string& source, const std::vector<ArtifactBytes>& artifacts,
                        const release::PrivateKey* signer = nullptr) {
    SignedRelease r = MakeRelease(signer != nullptr ? *signer : key_, source, artifacts);
    core_.Set("/releases/" + source + "/manifest.json", r.manifest_bytes);
    core_.Set("/releases/" + source + "/manifest.json.sig", r.signature_file);
    core_.Set("/releases/" + source + "/SHA256SUMS", r.sums);
    for (const ArtifactBytes& a : artifacts) core_.Set("/releases/" + source + "/" + a.name, a.bytes);
    return r;
  }
  void SetSpec(std::string bytes) {
    spec_ = std::move(bytes);
    digest_ = Sha256Hex(spec_);
    core_.Set(ConfigurationTarget(kGeneration), spec_);
  }

  PreparationOutcome Run() {
    PreparationOutcome o = RunPreparation(context_, GenerationRef{kGeneration, digest_}, &cancel_,
                                          [this](const PreparationProgress& p) {
                                            progress_.push_back(p);
                                          });
    EXPECT_TRUE(privhelper_.service.WaitIdle());
    return o;
  }
  std::vector<std::string> Calls() { return privhelper_.service.calls(); }
  // After an attempt that had to abort its upload: the upload was cancelled, never half-closed,
  // and nothing was published, and no step came after it. A half-closed upload would have
  // reached privhelper's handler before Run returned and be recorded with clean_end; a
  // cancelled one may be cancelled before the handler ever read its header (the pipelined
  // sender writes on the upload's own thread), so it need not be recorded at all.
  void ExpectUploadAbortedAndNothingPublished() {
    ASSERT_TRUE(privhelper_.service.WaitIdle());
    for (const testing::FakePrivhelperService::Upload& u : privhelper_.service.uploads()) {
      EXPECT_FALSE(u.clean_end);
      EXPECT_FALSE(u.published);
      EXPECT_LE(u.bytes.size(), image_.bytes.size());
    }
    EXPECT_TRUE(privhelper_.service.stored().empty());
    const std::vector<std::string> calls = Calls();
    ASSERT_GE(calls.size(), 2u);
    EXPECT_EQ(std::vector<std::string>(calls.begin(), calls.begin() + 2),
              Steps({"AdoptRelease", "BeginPreparation"}));
    EXPECT_LE(calls.size(), 3u);  // at most the aborted PutArtifact after them
  }
  static std::vector<std::string> Steps(std::initializer_list<const char*> s) {
    return std::vector<std::string>(s.begin(), s.end());
  }

  release::PrivateKey key_;
  std::optional<release::PublicKey> public_key_;
  FakePrivhelperServer privhelper_;
  GrpcPrivhelperPreparation client_;
  FakeCore core_;
  ArtifactBytes image_, profile_;
  wire::SpecificationDocument spec_doc_;
  std::string spec_;
  std::string digest_;
  PreparationContext context_;
  CancelToken cancel_;
  std::vector<PreparationProgress> progress_;
  std::vector<std::pair<int64_t, std::string>> stored_;
  size_t privhelper_calls_at_store_ = 0;
};

TEST_F(PrepareTest, PreparesFromThePinnedReleaseUploadingOnlyMissingArtifactsInBoundedChunks) {
  privhelper_.service.Store("profile.json");  // privhelper's store has it already
  PreparationOutcome o = Run();
  ASSERT_FALSE(o.failure.has_value()) << DiagnosticCode(*o.failure);
  EXPECT_EQ(o.state, HeldState::kReady);
  EXPECT_EQ(o.images, std::set<std::string>{"busybox"});
  EXPECT_EQ(Calls(), Steps({"AdoptRelease", "BeginPreparation", "PutArtifact",
                            "FinishPreparation"}));
  // The exact specification Core served, with its digest.
  ASSERT_TRUE(privhelper_.service.begun().has_value());
  EXPECT_EQ(privhelper_.service.begun()->specification(), spec_);
  EXPECT_EQ(privhelper_.service.begun()->specification_digest(), digest_);
  // Only the missing artifact travelled, whole, in chunks of at most 256 KiB.
  std::vector<testing::FakePrivhelperService::Upload> ups = privhelper_.service.uploads();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].name, "image.tar");
  EXPECT_TRUE(ups[0].clean_end);
  EXPECT_TRUE(ups[0].published);
  EXPECT_EQ(ups[0].bytes, image_.bytes);
  EXPECT_LE(ups[0].largest_chunk, privhelper::kMaxPayloadChunkBytes);
  // ... gathered into full chunks (the download's 64 KiB pieces are not sent one by one).
  EXPECT_EQ(ups[0].chunks, (image_.bytes.size() + privhelper::kMaxPayloadChunkBytes - 1) /
                               privhelper::kMaxPayloadChunkBytes);
  // The specification route is the only credentialed one; /releases/current is never read.
  EXPECT_EQ(core_.credentialed_targets,
            std::vector<std::string>{ConfigurationTarget(kGeneration)});
  for (const std::string& t : core_.asked) EXPECT_NE(t, "/releases/current");
  // The verified specification was stored before privhelper heard of it.
  ASSERT_EQ(stored_.size(), 1u);
  EXPECT_EQ(stored_[0].second, spec_);
  EXPECT_EQ(privhelper_calls_at_store_, 0u);
  // Progress: phases in order, the upload counted against the missing bytes only.
  ASSERT_FALSE(progress_.empty());
  EXPECT_EQ(progress_.front().phase, "specification");
  EXPECT_EQ(progress_.back().phase, "import");
  EXPECT_EQ(progress_.back().bytes_total, static_cast<int64_t>(image_.bytes.size()));
  EXPECT_EQ(progress_.back().bytes_done, static_cast<int64_t>(image_.bytes.size()));
}

TEST_F(PrepareTest, SpecificationWhoseDigestDiffersIsConfigurationInvalidAndReachesNoOne) {
  digest_ = std::string(64, 'e');
  PreparationOutcome o = Run();
  EXPECT_EQ(o.failure, Diagnostic::kConfigurationInvalid);
  EXPECT_TRUE(Calls().empty());
  EXPECT_TRUE(stored_.empty());
}

TEST_F(PrepareTest, SpecificationOfAnotherGenerationOrProviderIsConfigurationInvalid) {
  wire::SpecificationDocument other = spec_doc_;
  other.generation = 3;
  SetSpec(wire::EncodeSpecificationDocument(other));
  EXPECT_EQ(Run().failure, Diagnostic::kConfigurationInvalid);
  other = spec_doc_;
  other.provider = "microvm";
  SetSpec(wire::EncodeSpecificationDocument(other));
  EXPECT_EQ(Run().failure, Diagnostic::kConfigurationInvalid);
  EXPECT_TRUE(Calls().empty());
}

TEST_F(PrepareTest, ManifestSignedByAnotherKeyIsAProvenanceFailureAndReachesNoPrivhelper) {
  release::PrivateKey other = NewKey();
  Publish("rt-1", {image_, profile_}, &other);
  EXPECT_EQ(Run().failure, Diagnostic::kRuntimeDownloadFailed);
  EXPECT_TRUE(Calls().empty());
  for (const std::string& t : core_.asked) EXPECT_EQ(t.find("image.tar"), std::string::npos);
}

TEST_F(PrepareTest, Sha256SumsThatDisagreeWithTheManifestAreRefused) {
  SignedRelease r = MakeRelease(key_, "rt-1", {image_, profile_});
  std::string sums = r.sums;
  sums[0] = sums[0] == 'a' ? 'b' : 'a';
  core_.Set("/releases/rt-1/SHA256SUMS", sums);
  EXPECT_EQ(Run().failure, Diagnostic::kRuntimeDownloadFailed);
  EXPECT_TRUE(Calls().empty());
}

TEST_F(PrepareTest, MissingReleaseMetadataIsATransferFailure) {
  core_.routes.erase("/releases/rt-1/manifest.json.sig");
  EXPECT_EQ(Run().failure, Diagnostic::kRuntimeDownloadFailed);
  EXPECT_TRUE(Calls().empty());
}

TEST_F(PrepareTest, ConfigurationRouteThatFailsIsATransferFailure) {
  core_.Set(ConfigurationTarget(kGeneration), "", 503);
  EXPECT_EQ(Run().failure, Diagnostic::kRuntimeDownloadFailed);
  EXPECT_TRUE(Calls().empty());
}

TEST_F(PrepareTest, SpecificationThatDisagreesWithItsReleaseIsConfigurationInvalid) {
  wire::SpecificationDocument other = spec_doc_;
  other.artifacts[1].sha256 = std::string(64, '9');
  SetSpec(wire::EncodeSpecificationDocument(other));
  EXPECT_EQ(Run().failure, Diagnostic::kConfigurationInvalid);
  EXPECT_TRUE(Calls().empty());
}

// The agent counts the bytes; the digest is privhelper's check (docs/protocol.md 17d): the
// whole upload ends cleanly, privhelper refuses it, and the attempt stops there.
TEST_F(PrepareTest, ArtifactWithWrongBytesIsRefusedByPrivhelpersDigestAndNothingIsPublished) {
  std::string wrong = image_.bytes;
  wrong[wrong.size() - 1] ^= 0x01;  // same size, another SHA-256: seen only at the end
  core_.Set("/releases/rt-1/image.tar", wrong);
  privhelper_.service.Store("profile.json");  // only the image travels
  PreparationOutcome o = Run();
  EXPECT_EQ(o.failure, Diagnostic::kRuntimeDownloadFailed);
  ASSERT_TRUE(privhelper_.service.WaitIdle());
  const std::vector<testing::FakePrivhelperService::Upload> uploads =
      privhelper_.service.uploads();
  ASSERT_EQ(uploads.size(), 1u);
  EXPECT_TRUE(uploads[0].clean_end);
  EXPECT_EQ(uploads[0].bytes, wrong) << "every byte sent as served, none twice";
  EXPECT_FALSE(uploads[0].published);
  EXPECT_EQ(privhelper_.service.stored().count("image.tar"), 0u);
  EXPECT_EQ(Calls(), Steps({"AdoptRelease", "BeginPreparation", "PutArtifact"}))
      << "no FinishPreparation after the refusal";
}

TEST_F(PrepareTest, ArtifactLongerThanDeclaredIsRefusedBeforeTheExcessIsSent) {
  core_.Set("/releases/rt-1/image.tar", image_.bytes + std::string(100 * 1024, 'x'));
  // Chunked (no Content-Length to refuse it by): the streaming verifier stops it.
  core_.routes["/releases/rt-1/image.tar"].chunked = true;
  PreparationOutcome o = Run();
  EXPECT_EQ(o.failure, Diagnostic::kRuntimeDownloadFailed);
  ExpectUploadAbortedAndNothingPublished();  // and never more than the declared bytes sent
}

TEST_F(PrepareTest, ArtifactWhoseContentLengthDiffersFromTheManifestIsRefusedBeforeAnyByte) {
  core_.routes["/releases/rt-1/image.tar"].content_length = image_.bytes.size() - 1;
  PreparationOutcome o = Run();
  EXPECT_EQ(o.failure, Diagnostic::kRuntimeDownloadFailed);
  // Refused on its head: no upload was even opened.
  EXPECT_TRUE(privhelper_.service.uploads().empty());
  EXPECT_EQ(Calls(), Steps({"AdoptRelease", "BeginPreparation"}));
}

TEST_F(PrepareTest, AnArtifactRouteThatIsNot200OpensNoUpload) {
  core_.Set("/releases/rt-1/image.tar", "gone", 404);
  EXPECT_EQ(Run().failure, Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(Calls(), Steps({"AdoptRelease", "BeginPreparation"}));
}

TEST_F(PrepareTest, ABrokenDownloadIsATransferFailureAndSuspendsTheUploadPublishingNothing) {
  core_.routes["/releases/rt-1/image.tar"].cut_after = 300 * 1024;
  PreparationOutcome o = Run();
  EXPECT_EQ(o.failure, Diagnostic::kRuntimeDownloadFailed);
  std::vector<testing::FakePrivhelperService::Upload> ups = privhelper_.service.uploads();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_TRUE(ups[0].suspended);  // kept as a partial, never published
  EXPECT_FALSE(ups[0].published);
  EXPECT_TRUE(privhelper_.service.stored().empty());
  EXPECT_EQ(Calls(), Steps({"AdoptRelease", "BeginPreparation", "PutArtifact"}));
}

TEST_F(PrepareTest, CurrentChangingMidDownloadLeavesTheDownloadPinnedToItsRelease) {
  // Release rt-2 holds another image.tar; /releases/current moves to it mid-download.
  ArtifactBytes other_image{"image.tar", "image", Bytes(image_.bytes.size(), 'o')};
  Publish("rt-2", {other_image, profile_});
  core_.Set("/releases/current", "{\"source\":\"rt-1\"}");
  core_.routes["/releases/rt-1/image.tar"].at_half = [this] {
    core_.Set("/releases/current", "{\"source\":\"rt-2\"}");
  };
  PreparationOutcome o = Run();
  ASSERT_FALSE(o.failure.has_value()) << DiagnosticCode(*o.failure);
  EXPECT_EQ(core_.routes["/releases/current"].body, "{\"source\":\"rt-2\"}");  // it did change
  std::vector<testing::FakePrivhelperService::Upload> ups = privhelper_.service.uploads();
  ASSERT_EQ(ups.size(), 2u);
  EXPECT_EQ(ups[0].bytes, image_.bytes);  // rt-1's bytes, verified against rt-1's manifest
  for (const std::string& t : core_.asked) {
    EXPECT_TRUE(t.rfind("/releases/rt-1/", 0) == 0 || t == ConfigurationTarget(kGeneration))
        << t;
  }
}

TEST_F(PrepareTest, PrivhelpersTypedRefusalKeepsItsCodeAndEndsTheAttempt) {
  privhelper_.service.RefuseNext("BeginPreparation", privhelper::v1::OWNERSHIP_REFUSED,
                                 privhelper::v1::GENERATION_STATE_FAILED);
  PreparationOutcome o = Run();
  EXPECT_EQ(o.failure, Diagnostic::kOwnershipRefused);
  EXPECT_EQ(o.state, HeldState::kFailed);
  EXPECT_EQ(Calls(), Steps({"AdoptRelease", "BeginPreparation"}));
  for (const std::string& t : core_.asked) EXPECT_EQ(t.find("image.tar"), std::string::npos);
}

TEST_F(PrepareTest, PrivhelperRefusingAnUploadEarlyKeepsItsCode) {
  privhelper_.service.RefuseNext("PutArtifact", privhelper::v1::STORAGE_EXHAUSTED);
  PreparationOutcome o = Run();
  EXPECT_EQ(o.failure, Diagnostic::kStorageExhausted);
  EXPECT_EQ(Calls(), Steps({"AdoptRelease", "BeginPreparation", "PutArtifact"}));
}

TEST_F(PrepareTest, PrivhelpersOwnProvenanceCheckPassesThrough) {
  privhelper_.service.RefuseNext("AdoptRelease", privhelper::v1::RUNTIME_DOWNLOAD_FAILED);
  EXPECT_EQ(Run().failure, Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(Calls(), Steps({"AdoptRelease"}));
}

TEST_F(PrepareTest, CancellationMidDownloadIsPreparationCancelledAndAbortsTheUpload) {
  core_.routes["/releases/rt-1/image.tar"].at_half = [this] { cancel_.Cancel(); };
  PreparationOutcome o = Run();
  EXPECT_EQ(o.failure, Diagnostic::kPreparationCancelled);
  ExpectUploadAbortedAndNothingPublished();
}

TEST_F(PrepareTest, UnreachablePrivhelperIsProviderUnavailable) {
  GrpcPrivhelperPreparation nowhere("/tmp/agph-no-such-dir/ph.sock", absl::Seconds(2),
                                    absl::Seconds(2));
  context_.privhelper = &nowhere;
  EXPECT_EQ(Run().failure, Diagnostic::kProviderUnavailable);
}

TEST_F(PrepareTest, AFailedStoreOfTheSpecificationStopsBeforePrivhelper) {
  context_.store_specification = [](int64_t, const std::string&) {
    return absl::InternalError("disk");
  };
  EXPECT_EQ(Run().failure, Diagnostic::kProviderUnavailable);
  EXPECT_TRUE(Calls().empty());
}

// ---- Resuming an interrupted download (issue 11; docs/protocol.md 18a, 18b) ----

TEST_F(PrepareTest, AnInterruptedDownloadIsResumedFromWhatPrivhelperHoldsOnTheNextAttempt) {
  privhelper_.service.Store("profile.json");
  core_.routes["/releases/rt-1/image.tar"].cut_after = 300 * 1024;
  EXPECT_EQ(Run().failure, Diagnostic::kRuntimeDownloadFailed);
  // Every byte that arrived before the cut was sent, then the upload suspended: privhelper
  // holds exactly that prefix.
  std::vector<testing::FakePrivhelperService::Upload> ups = privhelper_.service.uploads();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_TRUE(ups[0].suspended);
  EXPECT_FALSE(ups[0].published);
  const size_t n = 300 * 1024;
  ASSERT_EQ(privhelper_.service.partials().count("image.tar"), 1u);
  EXPECT_EQ(privhelper_.service.partials().at("image.tar"), image_.bytes.substr(0, n));
  core_.routes["/releases/rt-1/image.tar"].cut_after.reset();
  core_.ranges.clear();
  PreparationOutcome o = Run();
  ASSERT_FALSE(o.failure.has_value()) << DiagnosticCode(*o.failure);
  EXPECT_EQ(core_.ranges, std::vector<uint64_t>{n});
  EXPECT_EQ(privhelper_.service.stored().count("image.tar"), 1u);
  EXPECT_TRUE(privhelper_.service.partials().empty());
}

TEST_F(PrepareTest, AHeldPrefixIsResumedWithARangeRequestAndTheWholeFileIsPublished) {
  privhelper_.service.Store("profile.json");
  const size_t n = 200 * 1024 + 5;
  privhelper_.service.SetPartial("image.tar", image_.bytes.substr(0, n));
  PreparationOutcome o = Run();
  ASSERT_FALSE(o.failure.has_value()) << DiagnosticCode(*o.failure);
  EXPECT_EQ(core_.ranges, std::vector<uint64_t>{n});  // Range: bytes=n-
  std::vector<testing::FakePrivhelperService::Upload> ups = privhelper_.service.uploads();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].offset, n);
  EXPECT_EQ(ups[0].bytes, image_.bytes.substr(n));  // only the rest travelled
  EXPECT_TRUE(ups[0].published);
  ASSERT_FALSE(progress_.empty());
  EXPECT_EQ(progress_.back().bytes_done, static_cast<int64_t>(image_.bytes.size()));
}

TEST_F(PrepareTest, ACoreThatIgnoresTheRangeRestartsTheArtifactFromByteZero) {
  privhelper_.service.Store("profile.json");
  privhelper_.service.SetPartial("image.tar", image_.bytes.substr(0, 1000));
  core_.routes["/releases/rt-1/image.tar"].ignore_range = true;  // 200, the whole body
  PreparationOutcome o = Run();
  ASSERT_FALSE(o.failure.has_value()) << DiagnosticCode(*o.failure);
  EXPECT_EQ(core_.ranges, std::vector<uint64_t>{1000});  // asked once, answered whole
  std::vector<testing::FakePrivhelperService::Upload> ups = privhelper_.service.uploads();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].offset, 0u);
  EXPECT_EQ(ups[0].bytes, image_.bytes);
  EXPECT_TRUE(ups[0].published);
}

TEST_F(PrepareTest, AResumedFileThatFailsTheWholeCheckIsFetchedOnceMoreFromZero) {
  privhelper_.service.Store("profile.json");
  std::string torn = image_.bytes.substr(0, 4096);
  torn[17] ^= 1;  // the held prefix is not what Core serves
  privhelper_.service.SetPartial("image.tar", torn);
  PreparationOutcome o = Run();
  ASSERT_FALSE(o.failure.has_value()) << DiagnosticCode(*o.failure);
  EXPECT_EQ(core_.ranges, (std::vector<uint64_t>{4096, 0}));
  std::vector<testing::FakePrivhelperService::Upload> ups = privhelper_.service.uploads();
  ASSERT_EQ(ups.size(), 2u);
  EXPECT_EQ(ups[0].offset, 4096u);
  EXPECT_FALSE(ups[0].published);
  EXPECT_EQ(ups[1].offset, 0u);
  EXPECT_TRUE(ups[1].published);
  EXPECT_EQ(Calls(), Steps({"AdoptRelease", "BeginPreparation", "PutArtifact", "PutArtifact",
                            "FinishPreparation"}));
}

TEST_F(PrepareTest, ASecondMismatchAfterTheRefetchIsRefusedWithTheChecksumDiagnostic) {
  privhelper_.service.Store("profile.json");
  privhelper_.service.SetPartial("image.tar", image_.bytes.substr(0, 4096));
  std::string wrong = image_.bytes;
  wrong[wrong.size() - 3] ^= 1;  // Core serves other bytes of the declared size
  core_.Set("/releases/rt-1/image.tar", wrong);
  PreparationOutcome o = Run();
  EXPECT_EQ(o.failure, Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(core_.ranges, (std::vector<uint64_t>{4096, 0}));  // once more, then refused
  EXPECT_TRUE(privhelper_.service.stored().count("image.tar") == 0);
  const std::vector<std::string> calls = Calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "FinishPreparation"), 0);
}

TEST_F(PrepareTest, A206WithAnotherContentRangeIsNotTakenAndTheArtifactIsFetchedFromZero) {
  privhelper_.service.Store("profile.json");
  privhelper_.service.SetPartial("image.tar", image_.bytes.substr(0, 4096));
  core_.routes["/releases/rt-1/image.tar"].content_range =
      "bytes 4000-" + std::to_string(image_.bytes.size() - 1) + "/" +
      std::to_string(image_.bytes.size());
  PreparationOutcome o = Run();
  ASSERT_FALSE(o.failure.has_value()) << DiagnosticCode(*o.failure);
  EXPECT_EQ(core_.ranges, (std::vector<uint64_t>{4096, 0}));
  std::vector<testing::FakePrivhelperService::Upload> ups = privhelper_.service.uploads();
  ASSERT_EQ(ups.size(), 1u);  // the wrong range never opened an upload
  EXPECT_EQ(ups[0].offset, 0u);
  EXPECT_TRUE(ups[0].published);
}

}  // namespace
}  // namespace sn::agent

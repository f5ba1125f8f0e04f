// Preparation in privhelper's store (issue 9) on the real filesystem: a signed release adopted
// with privhelper's own key, the plan, verified artifacts, the import seam, the lease and its
// identity, the final configuration; restarts at every stage; hostile releases and hostile
// local state. The backend's image store is a fake (the real one: tests/privhelper dockerd
// tests); every store file is real.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>

#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/lease.h"
#include "privhelper/store/state_dir.h"
#include "privhelper/store/prep_failure.h"
#include "privhelper/store/release_store.h"
#include "tests/privhelper/store/store_fixture.h"
#include "tests/privhelper/test_util.h"
#include "tests/release/fixture.h"

namespace sn::privhelper::store {
namespace {

using GenerationsTest = StoreTest;

TEST_F(GenerationsTest, PreparedGenerationIsReadyWithItsRecordsAndSurvivesARestart) {
  ASSERT_TRUE(Prepare(3, {image_}).ok());
  std::shared_ptr<const HeldGeneration> held = generations_->Find(3);
  ASSERT_NE(held, nullptr);
  ASSERT_NE(held->NativeImage("busybox"), nullptr);
  EXPECT_EQ(*held->NativeImage("busybox"), kImageId);
  EXPECT_EQ(importer_.loads, 1);
  struct stat st {};
  for (const char* f : {"3.specification", "3.json", "3.lease", "3.lease-identity"}) {
    EXPECT_EQ(lstat(Gen(f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 077, 0u) << f;
  }
  EXPECT_NE(lstat(Gen("3.preparing").c_str(), &st), 0) << "the plan is cleared";
  EXPECT_EQ(Slurp(state_path_ + "/releases/rel-1/busybox.tar"), image_.bytes);
  Reopen();
  ASSERT_NE(generations_->Find(3), nullptr);
  EXPECT_EQ(StatusOf(3).state, GenerationState::kReady);
}

TEST_F(GenerationsTest, AReleaseThatDoesNotVerifyIsAProvenanceFailureAndRecordsNothing) {
  SignedRelease r = Release({image_});
  SignedRelease forged = r;
  forged.manifest_bytes[10] ^= 1;  // the signature no longer covers these bytes
  EXPECT_EQ(DiagnosticOf(Adopt(forged)), Diagnostic::kRuntimeDownloadFailed);
  SignedRelease sums = r;
  sums.sums[0] = sums.sums[0] == 'a' ? 'b' : 'a';  // SHA256SUMS disagrees with the manifest
  EXPECT_EQ(DiagnosticOf(Adopt(sums)), Diagnostic::kRuntimeDownloadFailed);
  SignedRelease other_key = MakeRelease(NewKey(), "rel-1", {image_});
  EXPECT_EQ(DiagnosticOf(Adopt(other_key)), Diagnostic::kRuntimeDownloadFailed);
  struct stat st {};
  EXPECT_NE(stat((state_path_ + "/releases/rel-1/manifest.json").c_str(), &st), 0);
  // Then the genuine release; a different one under the same source later is refused.
  ASSERT_TRUE(Adopt(r).ok());
  ASSERT_TRUE(Adopt(r).ok());  // the same bytes again change nothing
  SignedRelease changed = Release({image_, helper_});
  EXPECT_EQ(DiagnosticOf(Adopt(changed)), Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(Slurp(state_path_ + "/releases/rel-1/manifest.json"), r.manifest_bytes);
}

TEST_F(GenerationsTest, BadSpecificationsAreConfigurationInvalidAndRecordNothing) {
  ASSERT_TRUE(Adopt(Release({image_})).ok());
  const std::string spec = Spec(3, {image_});
  EXPECT_EQ(DiagnosticOf(generations_->Begin(3, spec, Sha256Hex(spec + " ")).status()),
            Diagnostic::kConfigurationInvalid);  // another digest than Core announced
  EXPECT_EQ(DiagnosticOf(generations_->Begin(4, spec, Sha256Hex(spec)).status()),
            Diagnostic::kConfigurationInvalid);  // names another generation
  ArtifactBytes undeclared{"busybox.tar", "image", "other bytes"};
  const std::string lying = Spec(3, {undeclared});
  EXPECT_EQ(DiagnosticOf(generations_->Begin(3, lying, Sha256Hex(lying)).status()),
            Diagnostic::kConfigurationInvalid);  // disagrees with its signed release
  const std::string unadopted = Spec(3, {image_}, "rel-2");
  EXPECT_EQ(DiagnosticOf(generations_->Begin(3, unadopted, Sha256Hex(unadopted)).status()),
            Diagnostic::kConfigurationInvalid);  // its release was never adopted
  EXPECT_TRUE(generations_->Statuses().empty());
  struct stat st {};
  EXPECT_NE(stat(Gen("3.preparing").c_str(), &st), 0);
}

TEST_F(GenerationsTest, WrongArtifactBytesAreAChecksumFailureAndNothingIsPublished) {
  ASSERT_TRUE(Adopt(Release({image_})).ok());
  const std::string spec = Spec(3, {image_});
  ASSERT_TRUE(generations_->Begin(3, spec, Sha256Hex(spec)).ok());
  EXPECT_EQ(DiagnosticOf(Put(3, image_, image_.bytes + "x")), Diagnostic::kRuntimeDownloadFailed);
  std::string flipped = image_.bytes;
  flipped[5] ^= 1;
  EXPECT_EQ(DiagnosticOf(Put(3, image_, flipped)), Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(DiagnosticOf(Put(3, image_, image_.bytes.substr(1))),
            Diagnostic::kRuntimeDownloadFailed);
  struct stat st {};
  EXPECT_NE(stat((state_path_ + "/releases/rel-1/busybox.tar").c_str(), &st), 0);
  // Finish cannot publish without the verified artifact.
  EXPECT_EQ(DiagnosticOf(generations_->Finish(3, importer_)), Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(generations_->Find(3), nullptr);
  EXPECT_EQ(importer_.loads, 0);
}

// Generation 3 begun with its image verified and stored by this process, for the checks
// before the import.
class StoredImageTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    ASSERT_TRUE(Adopt(Release({image_})).ok());
    spec_ = Spec(3, {image_});
    ASSERT_TRUE(generations_->Begin(3, spec_, Sha256Hex(spec_)).ok());
    ASSERT_TRUE(Put(3, image_, image_.bytes).ok());
    stored_ = state_path_ + "/releases/rel-1/busybox.tar";
    flipped_ = image_.bytes;
    flipped_[7] ^= 1;
  }
  std::string spec_, stored_, flipped_;
};

// The import trusts a Writer's verification from moments ago only for the very file it
// published (ReleaseStore::CheckRecent): a file put in its place is hashed again and refused.
TEST_F(StoredImageTest, AnArtifactReplacedAfterItWasStoredIsCheckedInFullBeforeTheImport) {
  {
    std::ofstream(stored_ + ".new") << flipped_;
  }
  ASSERT_EQ(chmod((stored_ + ".new").c_str(), 0400), 0);
  ASSERT_EQ(rename((stored_ + ".new").c_str(), stored_.c_str()), 0);
  EXPECT_EQ(DiagnosticOf(generations_->Finish(3, importer_)), Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(importer_.loads, 0);
  EXPECT_EQ(generations_->Find(3), nullptr);
}

// Nothing of that trust survives a restart: the stored bytes are verified again, so bytes
// changed in place (the same inode) while privhelper was down are refused.
TEST_F(StoredImageTest, AfterARestartAStoredArtifactIsVerifiedAgainBeforeItIsUsed) {
  ASSERT_EQ(chmod(stored_.c_str(), 0600), 0);
  {
    std::ofstream(stored_, std::ios::in | std::ios::out | std::ios::binary) << flipped_;
  }
  ASSERT_EQ(chmod(stored_.c_str(), 0400), 0);
  Reopen();
  absl::Status begun = generations_->Begin(3, spec_, Sha256Hex(spec_)).status();
  absl::Status finished = begun.ok() ? generations_->Finish(3, importer_) : begun;
  EXPECT_EQ(DiagnosticOf(finished), Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(importer_.loads, 0);
  EXPECT_EQ(generations_->Find(3), nullptr);
}

TEST_F(GenerationsTest, APlanFoundAtStartNeedsABeginBeforeItIsFinishedAndMustNotDrift) {
  ASSERT_TRUE(Adopt(Release({image_})).ok());
  const std::string spec = Spec(3, {image_});
  ASSERT_TRUE(generations_->Begin(3, spec, Sha256Hex(spec)).ok());
  ASSERT_TRUE(Put(3, image_, image_.bytes).ok());
  Reopen();
  EXPECT_EQ(StatusOf(3).state, GenerationState::kPreparing);
  EXPECT_EQ(DiagnosticOf(generations_->Finish(3, importer_)), Diagnostic::kConfigurationInvalid);
  absl::StatusOr<std::vector<std::string>> missing = generations_->Begin(3, spec, Sha256Hex(spec));
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_TRUE(missing->empty()) << "the stored artifact is kept and verified";
  ASSERT_TRUE(generations_->Finish(3, importer_).ok());
  EXPECT_NE(generations_->Find(3), nullptr);
}

TEST_F(GenerationsTest, AnImageTheBackendAlreadyHoldsIsNotLoadedAgain) {
  importer_.held.insert(kImageId);
  ASSERT_TRUE(Prepare(3, {image_}).ok());
  EXPECT_EQ(importer_.loads, 0);
  ASSERT_NE(generations_->Find(3), nullptr);
}

TEST_F(GenerationsTest, AFailedImportKeepsThePlanWithImportStartedAndPublishesNothing) {
  importer_.fail_load = true;
  EXPECT_FALSE(Prepare(3, {image_}).ok());
  EXPECT_EQ(generations_->Find(3), nullptr);
  EXPECT_NE(Slurp(Gen("3.preparing")).find("\"import_started\":true"), std::string::npos);
  struct stat st {};
  EXPECT_NE(stat(Gen("3.json").c_str(), &st), 0);
  importer_.fail_load = false;
  const std::string spec = Spec(3, {image_});
  ASSERT_TRUE(generations_->Begin(3, spec, Sha256Hex(spec)).ok());
  ASSERT_TRUE(generations_->Finish(3, importer_).ok());
}

TEST_F(GenerationsTest, ALeaseWhoseIdentityNeverBecameDurableRefusesAdoptionAndIsKept) {
  ASSERT_TRUE(Adopt(Release({image_})).ok());
  const std::string spec = Spec(3, {image_});
  ASSERT_TRUE(generations_->Begin(3, spec, Sha256Hex(spec)).ok());
  // A crash between creating the lease and publishing its identity record.
  int fd = open(Gen("3.lease").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  Reopen();
  EXPECT_EQ(StatusOf(3).state, GenerationState::kFailed);
  EXPECT_EQ(StatusOf(3).diagnostic, Diagnostic::kOwnershipRefused);
  EXPECT_EQ(DiagnosticOf(generations_->Begin(3, spec, Sha256Hex(spec)).status()),
            Diagnostic::kOwnershipRefused);
  struct stat st {};
  EXPECT_EQ(stat(Gen("3.lease").c_str(), &st), 0);
  EXPECT_EQ(stat(Gen("3.preparing").c_str(), &st), 0);
}

TEST_F(GenerationsTest, AnInterruptionAfterTheFinalConfigurationClearsTheSamePlanOnlyOnce) {
  ASSERT_TRUE(Prepare(3, {image_}).ok());
  // Put the plan back as it was: a crash between publishing the final record and clearing it.
  Plan p;
  p.installation_id = kInstallation;
  p.generation = 3;
  p.specification_digest = StatusOf(3).specification_digest;
  p.source = "rel-1";
  p.artifacts.push_back({image_.name, image_.kind, Sha256Hex(image_.bytes),
                         static_cast<int64_t>(image_.bytes.size()),
                         ArtifactPath("rel-1", image_.name)});
  p.import_started = true;
  {
    std::ofstream(Gen("3.preparing")) << EncodePlan(p);
  }
  chmod(Gen("3.preparing").c_str(), 0600);
  Reopen();
  EXPECT_EQ(StatusOf(3).state, GenerationState::kReady);
  struct stat st {};
  EXPECT_NE(stat(Gen("3.preparing").c_str(), &st), 0);
  // A plan that drifted (another path) refuses instead.
  p.artifacts[0].sha256 = std::string(64, 'f');
  {
    std::ofstream(Gen("3.preparing")) << EncodePlan(p);
  }
  chmod(Gen("3.preparing").c_str(), 0600);
  Reopen();
  EXPECT_EQ(StatusOf(3).state, GenerationState::kFailed);
  EXPECT_EQ(StatusOf(3).diagnostic, Diagnostic::kConfigurationInvalid);
}

// Hostile local state: every way to swap the lease is refused with ownership_refused.
class LeaseAttackTest : public GenerationsTest {
 protected:
  void SetUp() override {
    GenerationsTest::SetUp();
    ASSERT_TRUE(Prepare(3, {image_}).ok());
    digest_ = StatusOf(3).specification_digest;
  }
  absl::StatusOr<std::unique_ptr<FileLock>> Open(LockMode mode = LockMode::kShared) {
    absl::StatusOr<Dir> gens = fs_.OpenDirAt(*state_, "node");
    EXPECT_TRUE(gens.ok());
    absl::StatusOr<Dir> g = fs_.OpenDirAt(*gens, "generations");
    EXPECT_TRUE(g.ok());
    return OpenLease(fs_, *g, geteuid(), 3, kInstallation, digest_, mode);
  }
  std::string digest_;
};

TEST_F(LeaseAttackTest, TheGenuineLeaseOpensSharedAndAHolderKeepsCollectionOut) {
  absl::StatusOr<std::unique_ptr<FileLock>> helper = Open(LockMode::kShared);
  ASSERT_TRUE(helper.ok()) << helper.status();
  EXPECT_TRUE(Open(LockMode::kShared).ok());
  EXPECT_TRUE(absl::IsUnavailable(Open(LockMode::kExclusive).status()));
  helper->reset();
  EXPECT_TRUE(Open(LockMode::kExclusive).ok());
}

TEST_F(LeaseAttackTest, SymlinkedLeaseIsRefused) {
  ASSERT_EQ(rename(Gen("3.lease").c_str(), Gen("real").c_str()), 0);
  ASSERT_EQ(symlink(Gen("real").c_str(), Gen("3.lease").c_str()), 0);
  EXPECT_EQ(DiagnosticOf(Open().status()), Diagnostic::kOwnershipRefused);
}

TEST_F(LeaseAttackTest, HardLinkedLeaseIsRefused) {
  ASSERT_EQ(link(Gen("3.lease").c_str(), tmp_.File("second").c_str()), 0);
  EXPECT_EQ(DiagnosticOf(Open().status()), Diagnostic::kOwnershipRefused);
}

TEST_F(LeaseAttackTest, ChmodedLeaseIsRefused) {
  ASSERT_EQ(chmod(Gen("3.lease").c_str(), 0644), 0);
  EXPECT_EQ(DiagnosticOf(Open().status()), Diagnostic::kOwnershipRefused);
}

TEST_F(LeaseAttackTest, ReownedLeaseIsRefused) {
  SN_REQUIRE_ROOT();
  ASSERT_EQ(chown(Gen("3.lease").c_str(), 65534, 65534), 0);
  EXPECT_EQ(DiagnosticOf(Open().status()), Diagnostic::kOwnershipRefused);
}

TEST_F(LeaseAttackTest, SwappedLeaseIsRefusedEvenWhenItsMetadataAgree) {
  ASSERT_EQ(unlink(Gen("3.lease").c_str()), 0);
  int fd = open(Gen("3.lease").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  close(fd);  // same name, owner, mode, size, links: another inode
  EXPECT_EQ(DiagnosticOf(Open().status()), Diagnostic::kOwnershipRefused);
}

TEST_F(LeaseAttackTest, MissingIdentityIsRefusedAndNeverRecreated) {
  ASSERT_EQ(unlink(Gen("3.lease-identity").c_str()), 0);
  EXPECT_EQ(DiagnosticOf(Open().status()), Diagnostic::kOwnershipRefused);
  Reopen();
  EXPECT_EQ(StatusOf(3).state, GenerationState::kFailed);
  struct stat st {};
  EXPECT_NE(stat(Gen("3.lease-identity").c_str(), &st), 0);
}

TEST_F(GenerationsTest, ARuntimeHelperIsExecutedFromTheStoreOnlyWhileItsBytesVerify) {
  ASSERT_TRUE(Prepare(3, {image_, helper_}).ok());
  absl::StatusOr<std::string> path = generations_->HelperPath(3);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, state_path_ + "/releases/rel-1/helper");
  struct stat st {};
  ASSERT_EQ(stat(path->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0500u);
  // A helper changed in the store is never run.
  chmod(path->c_str(), 0700);
  {
    std::ofstream(*path) << "#!/bin/sh\nexec evil\n";
  }
  chmod(path->c_str(), 0500);
  EXPECT_EQ(DiagnosticOf(generations_->HelperPath(3).status()), Diagnostic::kRuntimeDownloadFailed);
  // Without a helper artifact (the same release, a specification naming only the image), the
  // host's native helper runs.
  const std::string spec = Spec(4, {image_});
  ASSERT_TRUE(generations_->Begin(4, spec, Sha256Hex(spec)).ok());
  ASSERT_TRUE(generations_->Finish(4, importer_).ok());
  absl::StatusOr<std::string> host = generations_->HelperPath(4);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(*host, "");
}

}  // namespace
}  // namespace sn::privhelper::store

// Collection in privhelper's store (issue 10) on the real filesystem: what is removed (only
// the dropped generation's release files no other retained configuration references, each
// verified first), what stays (marker, lease, identity, final configuration, Docker images) and
// what a drop reclaims once its marker is durable (specification, plan, images record), the locks and references that refuse it, the journal and the dropped marker
// across restarts, and hostile local state. Crash points: store_crash_test.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "privhelper/store/collection_records.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/lease.h"
#include "tests/privhelper/store/store_fixture.h"

namespace sn::privhelper::store {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// The entries of a directory (no "." or "..").
std::vector<std::string> ListNames(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  return out;
}

class CollectionTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    other_ = ArtifactBytes{"busybox.tar", "image", kImageId + " another archive"};
  }

  CollectHooks Hooks() {
    CollectHooks h;
    h.unreferenced = [this] { return unreferenced_; };
    h.native_cleanup = [this](const std::vector<std::string>& images,
                              const std::vector<PlannedArtifact>&) {
      return importer_.ForgetImages(images);
    };
    return h;
  }
  std::string DigestOf(int64_t g) const { return StatusOf(g).specification_digest; }
  absl::Status Collect(int64_t g) { return generations_->Collect(g, DigestOf(g), Hooks()); }
  std::string Rel(const std::string& source, const std::string& name) const {
    return state_path_ + "/releases/" + source + "/" + name;
  }
  // Rewrites a stored artifact's bytes in place (a damaged or tampered file).
  void Tamper(const std::string& path, const std::string& bytes) {
    ASSERT_EQ(chmod(path.c_str(), 0600), 0);
    std::ofstream(path, std::ios::trunc) << bytes;
    ASSERT_EQ(chmod(path.c_str(), 0400), 0);
  }
  // What a dropped generation keeps (its identity records and marker) and what it no longer
  // has (second audit, finding 3).
  void ExpectRecordsKept(int64_t g) {
    for (const std::string suffix : {".json", ".lease", ".lease-identity", ".dropped"}) {
      EXPECT_TRUE(Exists(Gen(std::to_string(g) + suffix))) << g << suffix;
    }
    ExpectReclaimed(g);
  }
  void ExpectReclaimed(int64_t g) {
    for (const std::string suffix : {".specification", ".preparing", ".images", ".collecting"}) {
      EXPECT_FALSE(Exists(Gen(std::to_string(g) + suffix))) << g << suffix;
    }
  }

  absl::Status unreferenced_ = absl::OkStatus();
  ArtifactBytes other_;
};

TEST_F(CollectionTest, DroppedGenerationLosesOnlyItsReleaseFilesAndKeepsItsRecords) {
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  ASSERT_TRUE(Prepare(2, {other_}, "rel-2").ok());
  ASSERT_TRUE(Collect(1).ok());
  EXPECT_FALSE(Exists(Rel("rel-1", "busybox.tar")));
  EXPECT_FALSE(Exists(Rel("rel-1", "helper")));
  EXPECT_TRUE(Exists(Rel("rel-1", "manifest.json"))) << "release metadata stays";
  EXPECT_TRUE(Exists(Rel("rel-2", "busybox.tar")));
  ExpectRecordsKept(1);
  EXPECT_TRUE(Exists(Gen("1.dropped")));
  EXPECT_FALSE(Exists(Gen("1.collecting")));
  EXPECT_EQ(StatusOf(1).state, GenerationState::kDropped);
  EXPECT_EQ(generations_->Find(1), nullptr);
  EXPECT_NE(generations_->Find(2), nullptr);
  // The backend's cleanup runs once, told only the images no other generation holds: 2's
  // archive produces the same native image (the fake's identity), so nothing is forgotten.
  EXPECT_EQ(importer_.forgets, 1);
  EXPECT_TRUE(importer_.forgotten.empty());

  Reopen();
  EXPECT_EQ(StatusOf(1).state, GenerationState::kDropped);
  EXPECT_EQ(generations_->Find(1), nullptr);
  ASSERT_NE(generations_->Find(2), nullptr);
  // A dropped generation is never prepared again, and a second collection changes nothing.
  const std::string spec = Spec(1, {image_, helper_});
  absl::StatusOr<std::vector<std::string>> again = generations_->Begin(1, spec, Sha256Hex(spec));
  EXPECT_EQ(DiagnosticOf(again.status()), Diagnostic::kConfigurationInvalid);
  EXPECT_TRUE(Collect(1).ok());
  EXPECT_EQ(importer_.forgets, 1);
}

TEST_F(CollectionTest, FilesAnotherRetainedGenerationReferencesStay) {
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  ASSERT_TRUE(Prepare(2, {image_, helper_}).ok());  // the same release
  ASSERT_TRUE(Collect(1).ok());
  EXPECT_EQ(StatusOf(1).state, GenerationState::kDropped);
  EXPECT_EQ(Slurp(Rel("rel-1", "busybox.tar")), image_.bytes);
  ASSERT_NE(generations_->Find(2), nullptr);
  EXPECT_TRUE(generations_->HelperPath(2).ok());
  EXPECT_TRUE(importer_.forgotten.empty()) << "2 still holds the image";
  // Once 2 goes too, nothing references them: the files go and the image is forgotten.
  ASSERT_TRUE(Collect(2).ok());
  EXPECT_FALSE(Exists(Rel("rel-1", "busybox.tar")));
  EXPECT_EQ(importer_.forgets, 2);
  EXPECT_EQ(importer_.forgotten, std::vector<std::string>{kImageId});
}

TEST_F(CollectionTest, ALiveHelpersSharedLeaseRefusesAndChangesNothing) {
  ASSERT_TRUE(Prepare(1, {image_}).ok());
  absl::StatusOr<std::unique_ptr<FileLock>> helper = generations_->LockShared(1);
  ASSERT_TRUE(helper.ok()) << helper.status();
  absl::Status s = Collect(1);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(StatusOf(1).state, GenerationState::kReady);
  EXPECT_NE(generations_->Find(1), nullptr);
  EXPECT_TRUE(Exists(Rel("rel-1", "busybox.tar")));
  EXPECT_FALSE(Exists(Gen("1.collecting")));
  helper->reset();  // the helper was reaped
  EXPECT_TRUE(Collect(1).ok());
  EXPECT_TRUE(Exists(Gen("1.lease"))) << "leases are never removed";
}

TEST_F(CollectionTest, TheInstallationLockHeldByARepairRefuses) {
  ASSERT_TRUE(Prepare(1, {image_}).ok());
  ASSERT_TRUE(Collect(1).ok());  // creates node/installation.lock
  ASSERT_TRUE(Prepare(2, {other_}, "rel-2").ok());
  const std::string lock_path = state_path_ + "/node/installation.lock";
  int fd = open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  absl::Status s = Collect(2);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(StatusOf(2).state, GenerationState::kReady);
  close(fd);
  EXPECT_TRUE(Collect(2).ok());
}

TEST_F(CollectionTest, AReferenceFoundUnderTheLocksRefusesAndTheGenerationStaysUsable) {
  ASSERT_TRUE(Prepare(1, {image_}).ok());
  unreferenced_ = absl::UnavailableError("1 Execute call(s) in flight");
  absl::Status s = Collect(1);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(generations_->Find(1), nullptr);
  EXPECT_TRUE(Exists(Rel("rel-1", "busybox.tar")));
  EXPECT_EQ(importer_.forgets, 0);
  std::vector<GenerationDetail> details = generations_->Details();
  ASSERT_EQ(details.size(), 1u);
  EXPECT_NE(details[0].last_collection_error.find("in flight"), std::string::npos);
}

TEST_F(CollectionTest, ChangedBytesOrAnExtraLinkRefuseTheWholeCollectionBeforeAnyDeletion) {
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  Tamper(Rel("rel-1", "busybox.tar"), "other bytes");
  absl::Status s = Collect(1);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Exists(Rel("rel-1", "helper"))) << "nothing is removed when one file fails";
  EXPECT_FALSE(Exists(Gen("1.collecting")));
  Tamper(Rel("rel-1", "busybox.tar"), image_.bytes);
  ASSERT_EQ(link(Rel("rel-1", "helper").c_str(), tmp_.File("elsewhere").c_str()), 0);
  s = Collect(1);
  EXPECT_EQ(DiagnosticOf(s), Diagnostic::kOwnershipRefused) << s;
  EXPECT_TRUE(Exists(Rel("rel-1", "busybox.tar")));
  ASSERT_EQ(unlink(tmp_.File("elsewhere").c_str()), 0);
  EXPECT_TRUE(Collect(1).ok());
}

// Issue 11: every remaining file of the release directory, not only those to remove, is
// checked before the first deletion.
TEST_F(CollectionTest, AFileNoVerifiedManifestNamesRefusesTheWholeCollection) {
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  { std::ofstream(Rel("rel-1", "stray")) << "who put this here"; }
  ASSERT_EQ(chmod(Rel("rel-1", "stray").c_str(), 0400), 0);
  absl::Status s = Collect(1);
  EXPECT_EQ(DiagnosticOf(s), Diagnostic::kOwnershipRefused) << s;
  EXPECT_NE(s.message().find("stray"), absl::string_view::npos) << s;
  EXPECT_TRUE(Exists(Rel("rel-1", "busybox.tar")));
  EXPECT_TRUE(Exists(Rel("rel-1", "helper")));
  EXPECT_FALSE(Exists(Gen("1.collecting"))) << "refused before the journal";
  ASSERT_EQ(unlink(Rel("rel-1", "stray").c_str()), 0);
  EXPECT_TRUE(Collect(1).ok());
  EXPECT_TRUE(Exists(Rel("rel-1", "manifest.json"))) << "the manifests stay";
}

TEST_F(CollectionTest, AChangedFileAnotherGenerationKeepsRefusesTheCollectionToo) {
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  const std::string spec2 = Spec(2, {image_});  // generation 2 keeps only the image archive
  ASSERT_TRUE(generations_->Begin(2, spec2, Sha256Hex(spec2)).ok());
  ASSERT_TRUE(generations_->Finish(2, importer_).ok());
  // Collecting 1 would remove only the helper (2 references the archive), yet a tampered
  // archive or missing release metadata refuses the whole cleanup: nothing is removed.
  Tamper(Rel("rel-1", "busybox.tar"), "other bytes");
  EXPECT_FALSE(Collect(1).ok());
  EXPECT_TRUE(Exists(Rel("rel-1", "helper")));
  EXPECT_FALSE(Exists(Gen("1.collecting")));
  Tamper(Rel("rel-1", "busybox.tar"), image_.bytes);
  ASSERT_EQ(rename(Rel("rel-1", "SHA256SUMS").c_str(), tmp_.File("sums").c_str()), 0);
  EXPECT_FALSE(Collect(1).ok());
  EXPECT_TRUE(Exists(Rel("rel-1", "helper")));
  ASSERT_EQ(rename(tmp_.File("sums").c_str(), Rel("rel-1", "SHA256SUMS").c_str()), 0);
  EXPECT_TRUE(Collect(1).ok());
  EXPECT_FALSE(Exists(Rel("rel-1", "helper")));
  EXPECT_EQ(Slurp(Rel("rel-1", "busybox.tar")), image_.bytes) << "2's archive stays";
  EXPECT_NE(generations_->Find(2), nullptr);
}

TEST_F(CollectionTest, AnotherDigestAnUnknownGenerationOrFailedRecordsAreRefused) {
  ASSERT_TRUE(Prepare(1, {image_}).ok());
  absl::Status s = generations_->Collect(1, std::string(64, 'b'), Hooks());
  EXPECT_EQ(DiagnosticOf(s), Diagnostic::kConfigurationInvalid) << s;
  EXPECT_TRUE(absl::IsNotFound(generations_->Collect(9, std::string(64, 'b'), Hooks())));
  // Records that refuse adoption are kept for inspection, never collected.
  ASSERT_EQ(chmod(Gen("1.json").c_str(), 0600), 0);
  std::ofstream(Gen("1.json"), std::ios::app) << "torn";
  Reopen();
  ASSERT_EQ(StatusOf(1).state, GenerationState::kFailed);
  s = Collect(1);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(Exists(Rel("rel-1", "busybox.tar")));
}

TEST_F(CollectionTest, AnotherGenerationWhoseReferencesCannotBeReadRefusesCollection) {
  ASSERT_TRUE(Prepare(1, {image_}).ok());
  ASSERT_TRUE(Prepare(2, {image_}).ok());
  ASSERT_EQ(chmod(Gen("2.json").c_str(), 0600), 0);
  std::ofstream(Gen("2.json"), std::ios::trunc) << "{}";
  Reopen();
  absl::Status s = Collect(1);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(std::string(s.message()).find("references are unknown"), std::string::npos) << s;
  EXPECT_TRUE(Exists(Rel("rel-1", "busybox.tar")));
  EXPECT_NE(generations_->Find(1), nullptr);
}

TEST_F(CollectionTest, APreparationThatNeverStartedItsImportIsCollectedWithWhatItStored) {
  ASSERT_TRUE(Adopt(Release({image_, helper_})).ok());
  const std::string spec = Spec(4, {image_, helper_});
  ASSERT_TRUE(generations_->Begin(4, spec, Sha256Hex(spec)).ok());
  ASSERT_TRUE(Put(4, helper_, helper_.bytes).ok());
  std::vector<GenerationDetail> details = generations_->Details();
  ASSERT_EQ(details.size(), 1u);
  ASSERT_TRUE(details[0].progress.has_value());
  EXPECT_EQ(details[0].progress->artifacts_stored, 1);
  EXPECT_EQ(details[0].progress->artifacts_total, 2);
  EXPECT_EQ(details[0].progress->bytes_stored, static_cast<int64_t>(helper_.bytes.size()));
  EXPECT_FALSE(details[0].progress->import_started);
  Reopen();  // the plan is all that is left of the preparation
  ASSERT_TRUE(Collect(4).ok());
  EXPECT_FALSE(Exists(Rel("rel-1", "helper")));
  ExpectReclaimed(4);
  EXPECT_TRUE(Exists(Gen("4.dropped")));
  EXPECT_EQ(StatusOf(4).state, GenerationState::kDropped);
  // A later Finish of the dropped generation is refused.
  EXPECT_FALSE(generations_->Finish(4, importer_).ok());
}

TEST_F(CollectionTest, MissingFilesOfAGenerationWhoseImportMayHaveStartedKeepItRetained) {
  ASSERT_TRUE(Adopt(Release({image_, helper_})).ok());
  const std::string spec = Spec(4, {image_, helper_});
  ASSERT_TRUE(generations_->Begin(4, spec, Sha256Hex(spec)).ok());
  ASSERT_TRUE(Put(4, image_, image_.bytes).ok());
  ASSERT_TRUE(Put(4, helper_, helper_.bytes).ok());
  importer_.fail_load = true;
  ASSERT_FALSE(generations_->Finish(4, importer_).ok());  // the plan now says import_started
  ASSERT_EQ(unlink(Rel("rel-1", "busybox.tar").c_str()), 0);
  absl::Status s = Collect(4);
  EXPECT_EQ(DiagnosticOf(s), Diagnostic::kOwnershipRefused) << s;
  EXPECT_NE(std::string(s.message()).find("never prove native absence"), std::string::npos);
  EXPECT_TRUE(Exists(Rel("rel-1", "helper")));
  EXPECT_FALSE(Exists(Gen("4.collecting")));
  EXPECT_EQ(StatusOf(4).state, GenerationState::kPreparing);
}

TEST_F(CollectionTest, AnUnfinishedJournalMakesTheGenerationUnusableUntilANewCollectFinishesIt) {
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  importer_.fail_forget = true;  // the native cleanup fails after the journal is durable
  EXPECT_FALSE(Collect(1).ok());
  ASSERT_TRUE(Exists(Gen("1.collecting")));
  EXPECT_TRUE(Exists(Rel("rel-1", "busybox.tar"))) << "no file goes before native_done";
  Reopen();
  EXPECT_EQ(StatusOf(1).state, GenerationState::kCollecting);
  EXPECT_EQ(generations_->Find(1), nullptr);
  EXPECT_FALSE(generations_->LockShared(1).ok());
  const std::string spec = Spec(1, {image_, helper_});
  EXPECT_FALSE(generations_->Begin(1, spec, Sha256Hex(spec)).ok());
  importer_.fail_forget = false;
  ASSERT_TRUE(Collect(1).ok());
  EXPECT_FALSE(Exists(Rel("rel-1", "busybox.tar")));
  EXPECT_FALSE(Exists(Gen("1.collecting")));
  EXPECT_EQ(StatusOf(1).state, GenerationState::kDropped);
}

TEST_F(CollectionTest, ARetryAfterNativeCompletionNeverRunsTheNativeCleanupAgain) {
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  // As a crash would leave it: the journal durable with native_done, one file already gone.
  CollectionJournal j{kInstallation, 1, DigestOf(1), "rel-1", true, {}, true};
  for (const ArtifactBytes& a : {image_, helper_}) {
    j.files.push_back({a.name, a.kind, Describe(a).sha256, static_cast<int64_t>(a.bytes.size()),
                       ArtifactPath("rel-1", a.name)});
  }
  absl::StatusOr<Dir> node = fs_.OpenDirAt(*state_, "node");
  ASSERT_TRUE(node.ok());
  absl::StatusOr<Dir> dir = fs_.OpenDirAt(*node, "generations");
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(PublishOnce(fs_, *dir, "1.collecting", EncodeCollectionJournal(j)).ok());
  ASSERT_EQ(unlink(Rel("rel-1", "helper").c_str()), 0);
  Reopen();
  ASSERT_EQ(StatusOf(1).state, GenerationState::kCollecting);
  ASSERT_TRUE(Collect(1).ok());
  EXPECT_EQ(importer_.forgets, 0);
  EXPECT_FALSE(Exists(Rel("rel-1", "busybox.tar")));
  EXPECT_EQ(StatusOf(1).state, GenerationState::kDropped);
}

TEST_F(CollectionTest, AResumedCollectionKeepsFilesAGenerationPreparedSinceReferences) {
  ASSERT_TRUE(Prepare(1, {image_}).ok());
  importer_.fail_forget = true;
  EXPECT_FALSE(Collect(1).ok());  // the journal lists busybox.tar
  importer_.fail_forget = false;
  ASSERT_TRUE(Prepare(7, {image_}).ok());  // the same release, prepared meanwhile
  ASSERT_TRUE(Collect(1).ok());
  EXPECT_EQ(Slurp(Rel("rel-1", "busybox.tar")), image_.bytes);
  ASSERT_NE(generations_->Find(7), nullptr);
}

TEST_F(CollectionTest, AJournalLeftBesideADurableMarkerIsClearedAtStart) {
  ASSERT_TRUE(Prepare(1, {image_}).ok());
  ASSERT_TRUE(Collect(1).ok());
  absl::StatusOr<Dir> node = fs_.OpenDirAt(*state_, "node");
  ASSERT_TRUE(node.ok());
  absl::StatusOr<Dir> dir = fs_.OpenDirAt(*node, "generations");
  ASSERT_TRUE(dir.ok());
  CollectionJournal j{kInstallation, 1, DigestOf(1), "rel-1", true, {}, true};
  ASSERT_TRUE(PublishOnce(fs_, *dir, "1.collecting", EncodeCollectionJournal(j)).ok());
  Reopen();
  EXPECT_EQ(StatusOf(1).state, GenerationState::kDropped);
  EXPECT_FALSE(Exists(Gen("1.collecting")));
}

// A crash between the durable marker and the removals (or a removal that failed) leaves the
// specification, plan or images record beside the marker: the next start removes them and the
// generation is DROPPED, its identity records kept.
TEST_F(CollectionTest, RecordsLeftBesideADurableMarkerAreReclaimedAtStart) {
  ASSERT_TRUE(Prepare(1, {image_}).ok());
  const std::string spec = Slurp(Gen("1.specification"));
  const std::string images = Slurp(Gen("1.images"));
  ASSERT_FALSE(spec.empty());
  ASSERT_FALSE(images.empty());
  ASSERT_TRUE(Collect(1).ok());
  ExpectRecordsKept(1);
  absl::StatusOr<Dir> node = fs_.OpenDirAt(*state_, "node");
  ASSERT_TRUE(node.ok());
  absl::StatusOr<Dir> dir = fs_.OpenDirAt(*node, "generations");
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(PublishOnce(fs_, *dir, "1.specification", spec).ok());
  ASSERT_TRUE(PublishOnce(fs_, *dir, "1.images", images).ok());
  Plan plan;
  plan.installation_id = kInstallation;
  plan.generation = 1;
  plan.specification_digest = DigestOf(1);
  plan.source = "rel-1";
  ASSERT_TRUE(PublishOnce(fs_, *dir, "1.preparing", EncodePlan(plan)).ok());
  Reopen();
  EXPECT_EQ(StatusOf(1).state, GenerationState::kDropped);
  ExpectRecordsKept(1);
  EXPECT_TRUE(Collect(1).ok());
}

// The second audit's store flood, collected: junk generations begun and dropped one after the
// other leave one marker each (a few hundred bytes) and nothing else, on disk and in memory.
TEST_F(CollectionTest, JunkGenerationsBegunAndDroppedLeaveOnlyTheirMarkers) {
  ASSERT_TRUE(Adopt(Release({image_, helper_})).ok());
  generations_->SetMaxGenerations(2);
  constexpr int64_t kJunk = 200;
  for (int64_t g = 1; g <= kJunk; ++g) {
    const std::string spec = Spec(g, {image_, helper_});
    ASSERT_TRUE(generations_->Begin(g, spec, Sha256Hex(spec)).ok()) << g;
    if (g % 2 == 0) {
      ASSERT_TRUE(Put(g, helper_, helper_.bytes).ok()) << g;  // a file of its own, collected
    }
    ASSERT_TRUE(Collect(g).ok()) << g;
  }
  auto expect_only_markers = [&] {
    std::vector<std::string> names = ListNames(Gen(""));
    EXPECT_EQ(names.size(), static_cast<size_t>(kJunk));
    for (const std::string& n : names) {
      EXPECT_TRUE(n.size() > 8 && n.substr(n.size() - 8) == ".dropped") << n;
    }
    for (const GenerationDetail& d : generations_->Details()) {
      EXPECT_EQ(d.status.state, GenerationState::kDropped);
      EXPECT_FALSE(d.progress.has_value());
    }
    EXPECT_FALSE(Exists(Rel("rel-1", "helper")));
  };
  expect_only_markers();
  // Dropped generations are not counted: a new one still begins.
  const std::string next = Spec(kJunk + 1, {image_, helper_});
  EXPECT_TRUE(generations_->Begin(kJunk + 1, next, Sha256Hex(next)).ok());
  ASSERT_TRUE(Collect(kJunk + 1).ok());
  Reopen();
  generations_->SetMaxGenerations(2);
  std::vector<std::string> names = ListNames(Gen(""));
  EXPECT_EQ(names.size(), static_cast<size_t>(kJunk + 1));
  EXPECT_EQ(generations_->Statuses().size(), static_cast<size_t>(kJunk + 1));
}

TEST_F(CollectionTest, ForeignOrTornCollectionRecordsRefuseAdoption) {
  ASSERT_TRUE(Prepare(1, {image_}).ok());
  absl::StatusOr<Dir> node = fs_.OpenDirAt(*state_, "node");
  ASSERT_TRUE(node.ok());
  absl::StatusOr<Dir> dir = fs_.OpenDirAt(*node, "generations");
  ASSERT_TRUE(dir.ok());
  DroppedMarker m{"0000bbbb-0000-4000-8000-0000000000bb", 1, DigestOf(1)};
  ASSERT_TRUE(PublishOnce(fs_, *dir, "1.dropped", EncodeDroppedMarker(m)).ok());
  Reopen();
  EXPECT_EQ(StatusOf(1).state, GenerationState::kFailed);
  EXPECT_EQ(generations_->Find(1), nullptr);
  EXPECT_FALSE(Collect(1).ok());
  EXPECT_TRUE(Exists(Rel("rel-1", "busybox.tar")));
}

TEST_F(CollectionTest, DetailsNameTheLeaseFileWithoutLockingIt) {
  ASSERT_TRUE(Prepare(1, {image_}).ok());
  absl::StatusOr<Dir> node = fs_.OpenDirAt(*state_, "node");
  ASSERT_TRUE(node.ok());
  absl::StatusOr<Dir> dir = fs_.OpenDirAt(*node, "generations");
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<std::unique_ptr<FileLock>> exclusive =
      fs_.LockAt(*dir, "1.lease", LockMode::kExclusive);
  ASSERT_TRUE(exclusive.ok()) << exclusive.status();
  std::vector<GenerationDetail> details = generations_->Details();  // never blocks or fails
  ASSERT_EQ(details.size(), 1u);
  ASSERT_TRUE(details[0].lease_dev_ino.has_value());
  struct stat st {};
  ASSERT_EQ(stat(Gen("1.lease").c_str(), &st), 0);
  EXPECT_EQ(details[0].lease_dev_ino->first, static_cast<uint64_t>(st.st_dev));
  EXPECT_EQ(details[0].lease_dev_ino->second, static_cast<uint64_t>(st.st_ino));
}

}  // namespace
}  // namespace sn::privhelper::store

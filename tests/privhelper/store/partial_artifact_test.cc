// Partial artifacts in privhelper's release store (issue 11, "an interrupted download resumes
// from the bytes it has"): an upload that ends without Commit keeps its verified prefix as
// .<name>.partial; a Writer at exactly that offset hashes the prefix from privhelper's own
// file and publishes only the whole verified file; other offsets are refused and keep the
// partial; a resumed file that fails the whole-file check discards it; collection's
// pre-check accepts a partial only of a named artifact, and collection removes it. Real
// filesystem (StoreTest).
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "common/sha256.h"
#include "gtest/gtest.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/prep_failure.h"
#include "privhelper/store/release_store.h"
#include "tests/privhelper/store/store_fixture.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper::store {
namespace {

class PartialArtifactTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    image_.bytes = std::string(200 * 1024, 'i') + "tail of the image";
    ASSERT_TRUE(Adopt(Release({image_, helper_})).ok());
    spec_ = Spec(3, {image_, helper_});
    ASSERT_TRUE(generations_->Begin(3, spec_, Sha256Hex(spec_)).ok());
    partial_ = state_path_ + "/releases/rel-1/.busybox.tar.partial";
    stored_ = state_path_ + "/releases/rel-1/busybox.tar";
  }
  // An upload of `bytes` from `offset` that ends without Commit (a cancelled stream).
  absl::Status Interrupted(uint64_t offset, const std::string& bytes) {
    absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> w =
        generations_->WriteArtifact(3, image_.name, offset);
    if (!w.ok()) return w.status();
    return (*w)->Append(bytes);
  }
  absl::Status Resumed(uint64_t offset, const std::string& bytes) {
    absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> w =
        generations_->WriteArtifact(3, image_.name, offset);
    if (!w.ok()) return w.status();
    if (absl::Status s = (*w)->Append(bytes); !s.ok()) return s;
    return (*w)->Commit();
  }
  uint64_t Held() {
    absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> held =
        generations_->HeldPartials(3, {image_.name, helper_.name});
    EXPECT_TRUE(held.ok()) << held.status();
    for (const auto& [name, n] : *held) {
      if (name == image_.name) return n;
    }
    return 0;
  }
  static bool Exists(const std::string& path) {
    struct stat st {};
    return lstat(path.c_str(), &st) == 0;
  }

  std::string spec_, partial_, stored_;
};

TEST_F(PartialArtifactTest, AnUploadEndingWithoutCommitKeepsItsBytesAndAResumePublishesTheFile) {
  const size_t cut = 70 * 1024 + 3;
  ASSERT_TRUE(Interrupted(0, image_.bytes.substr(0, cut)).ok());
  EXPECT_EQ(Held(), cut);
  EXPECT_EQ(Slurp(partial_), image_.bytes.substr(0, cut));
  EXPECT_FALSE(Exists(stored_)) << "a partial never makes the file present";
  // Begin again (a new attempt) reports it missing, and the partial stays.
  absl::StatusOr<std::vector<std::string>> missing = generations_->Begin(3, spec_, Sha256Hex(spec_));
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->size(), 2u);
  ASSERT_TRUE(Resumed(cut, image_.bytes.substr(cut)).ok());
  EXPECT_EQ(Slurp(stored_), image_.bytes);
  EXPECT_FALSE(Exists(partial_));
  EXPECT_EQ(Held(), 0u);
}

TEST_F(PartialArtifactTest, AResumeOfAResumeKeepsTheWholeVerifiedPrefix) {
  ASSERT_TRUE(Interrupted(0, image_.bytes.substr(0, 1000)).ok());
  ASSERT_TRUE(Interrupted(1000, image_.bytes.substr(1000, 5000)).ok());
  EXPECT_EQ(Held(), 6000u);
  EXPECT_EQ(Slurp(partial_), image_.bytes.substr(0, 6000));
  ASSERT_TRUE(Resumed(6000, image_.bytes.substr(6000)).ok());
  EXPECT_EQ(Slurp(stored_), image_.bytes);
}

TEST_F(PartialArtifactTest, AnOffsetOtherThanZeroOrTheHeldSizeIsRefusedAndThePartialKept) {
  ASSERT_TRUE(Interrupted(0, image_.bytes.substr(0, 4096)).ok());
  for (uint64_t offset : {uint64_t{4095}, uint64_t{4097}, uint64_t{image_.bytes.size()},
                          uint64_t{image_.bytes.size() + 10}}) {
    absl::Status s = Resumed(offset, image_.bytes.substr(std::min<size_t>(offset, image_.bytes.size())));
    EXPECT_EQ(PrepDiagnosticOf(s), Diagnostic::kConfigurationInvalid) << offset;
    EXPECT_NE(std::string(s.message()).find("holds 4096 bytes of it"), std::string::npos) << s;
    EXPECT_EQ(Slurp(partial_), image_.bytes.substr(0, 4096)) << offset;
  }
  // Without a partial, only 0.
  absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> w =
      generations_->WriteArtifact(3, helper_.name, 2);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(PrepDiagnosticOf(w.status()), Diagnostic::kConfigurationInvalid);
  EXPECT_NE(std::string(w.status().message()).find("holds no partial"), std::string::npos);
  EXPECT_FALSE(Exists(state_path_ + "/releases/rel-1/.helper.partial"));
}

TEST_F(PartialArtifactTest, OffsetZeroDiscardsThePartialAndStartsAfresh) {
  ASSERT_TRUE(Interrupted(0, image_.bytes.substr(0, 3000)).ok());
  absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> w =
      generations_->WriteArtifact(3, image_.name, 0);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(Exists(partial_)) << "a fresh upload discards what was held";
  ASSERT_TRUE((*w)->Append(image_.bytes).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  EXPECT_EQ(Slurp(stored_), image_.bytes);
}

TEST_F(PartialArtifactTest, ResumedBytesThatFailTheWholeFileCheckDiscardThePartial) {
  // The held prefix is torn (as after a crash: partials are not fsynced): the agent's new
  // bytes are right, the whole file is not.
  ASSERT_TRUE(Interrupted(0, image_.bytes.substr(0, 9000)).ok());
  {
    std::fstream f(partial_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\0');
  }
  absl::Status s = Resumed(9000, image_.bytes.substr(9000));
  EXPECT_EQ(PrepDiagnosticOf(s), Diagnostic::kRuntimeDownloadFailed) << s;
  EXPECT_FALSE(Exists(partial_));
  EXPECT_FALSE(Exists(stored_));
  EXPECT_EQ(Held(), 0u);
  // More bytes than declared after the prefix: refused, discarded too.
  ASSERT_TRUE(Interrupted(0, image_.bytes.substr(0, 9000)).ok());
  s = Resumed(9000, image_.bytes.substr(9000) + "x");
  EXPECT_EQ(PrepDiagnosticOf(s), Diagnostic::kRuntimeDownloadFailed) << s;
  EXPECT_FALSE(Exists(partial_));
}

TEST_F(PartialArtifactTest, APartialIsBoundedBelowTheDeclaredSizeAndNeverHoldsRefusedBytes) {
  // All declared bytes but no Commit: nothing worth resuming, discarded.
  ASSERT_TRUE(Interrupted(0, image_.bytes).ok());
  EXPECT_FALSE(Exists(partial_));
  // An excess is refused before it is written, and that upload keeps nothing.
  EXPECT_FALSE(Interrupted(0, image_.bytes + "x").ok());
  EXPECT_FALSE(Exists(partial_));
  // A partial grown to the declared size (not one privhelper wrote) is discarded when found.
  { std::ofstream(partial_) << image_.bytes; }
  ASSERT_EQ(chmod(partial_.c_str(), 0400), 0);
  EXPECT_EQ(Held(), 0u);
  EXPECT_FALSE(Exists(partial_));
  // So is one that is not private.
  { std::ofstream(partial_) << image_.bytes.substr(0, 10); }
  ASSERT_EQ(chmod(partial_.c_str(), 0644), 0);
  EXPECT_EQ(Held(), 0u);
  EXPECT_FALSE(Exists(partial_));
}

TEST_F(PartialArtifactTest, APartialSurvivesARestartAndIsResumedThen) {
  ASSERT_TRUE(Interrupted(0, image_.bytes.substr(0, 12345)).ok());
  Reopen();
  ASSERT_TRUE(generations_->Begin(3, spec_, Sha256Hex(spec_)).ok());
  EXPECT_EQ(Held(), 12345u);
  ASSERT_TRUE(Resumed(12345, image_.bytes.substr(12345)).ok());
  EXPECT_EQ(Slurp(stored_), image_.bytes);
}

TEST_F(PartialArtifactTest, APartialOfAStoredArtifactIsRemovedWhenBeginsPartialsAreListed) {
  ASSERT_TRUE(Resumed(0, image_.bytes).ok());
  { std::ofstream(partial_) << image_.bytes.substr(0, 10); }
  ASSERT_EQ(chmod(partial_.c_str(), 0400), 0);
  absl::StatusOr<std::vector<std::string>> missing = generations_->Begin(3, spec_, Sha256Hex(spec_));
  ASSERT_TRUE(missing.ok());
  ASSERT_EQ(*missing, std::vector<std::string>{helper_.name});
  absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> held =
      generations_->HeldPartials(3, *missing);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->empty());
  EXPECT_FALSE(Exists(partial_));
}

TEST_F(PartialArtifactTest, CollectionsPrecheckAcceptsAPartialOfANamedArtifactOnly) {
  ASSERT_TRUE(Interrupted(0, image_.bytes.substr(0, 100)).ok());
  EXPECT_TRUE(releases_->CheckEveryFile("rel-1").ok());
  const std::string stray = state_path_ + "/releases/rel-1/.unnamed.tar.partial";
  { std::ofstream(stray) << "x"; }
  ASSERT_EQ(chmod(stray.c_str(), 0400), 0);
  absl::Status s = releases_->CheckEveryFile("rel-1");
  EXPECT_EQ(PrepDiagnosticOf(s), Diagnostic::kOwnershipRefused) << s;
  EXPECT_NE(std::string(s.message()).find("a partial of a file the verified manifest does not name"),
            std::string::npos);
  ASSERT_EQ(unlink(stray.c_str()), 0);
  // Collection's removal of the artifact takes its partial with it, stored or not.
  EXPECT_TRUE(absl::IsNotFound(releases_->Remove("rel-1", Describe(image_))));
  EXPECT_FALSE(Exists(partial_));
}

}  // namespace
}  // namespace sn::privhelper::store

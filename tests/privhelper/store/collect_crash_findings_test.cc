// Regressions of the findings the collection crash sweeps made (collect_crash_test;
// docs/formats.md "Crash safety of privhelper's store"), each fixed in
// privhelper/store/collection.cc:
//  E  a journal renamed into place whose directory fsync then failed was treated as never
//     written: the generation went back to READY (held, its helper runnable) in that process
//     while the journal on disk made it COLLECTING after any restart. Now a journal on disk
//     counts, durable or not, and the generation stays COLLECTING.
//  F  a retry in the same process acted on a journal an earlier attempt had written without a
//     durable directory entry (native_done rewritten, its directory fsync failed): it removed
//     release files and a power loss before the next fsync of node/generations brought back
//     the journal with native_done false beside the removed files, so the native cleanup would
//     have run again on a partly removed release. Now a journal read is made durable (its
//     directory fsynced) before collection acts on it.
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "gtest/gtest.h"
#include "privhelper/store/collection_records.h"
#include "tests/privhelper/store/collect_crash_internal.h"

namespace sn::privhelper::store {

using fs::FaultFs;
namespace {

// The 1-based step of `log` after `after` whose text satisfies `match`, or 0.
int64_t StepOf(const std::vector<std::string>& log,
               const std::function<bool(const std::string&)>& match, int64_t after = 0) {
  for (size_t i = static_cast<size_t>(after); i < log.size(); ++i) {
    if (match(log[i])) return static_cast<int64_t>(i) + 1;
  }
  return 0;
}

bool Contains(const std::string& line, const char* what) { return absl::StrContains(line, what); }

class CollectCrashFindingsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { InitLogging("privhelper", LogLevel::kError); }

  void SetUp() override {
    world_ = MakeCollectWorld();
    SetupCollection(fs_, *world_, CollectStage::kReady);
    fs_.KillProcess();  // steps count from here in fs_ and in every copy of it
  }

  // The steps of collecting generation 3 on a copy of fs_, failing step `fail` (if > 0) and
  // then collecting once more in the same process.
  std::vector<std::string> LogOnCopy(int64_t fail) {
    FaultFs copy(fs_.options(), fs_.Snapshot());
    absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(copy, world_->prep);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return {};
    if (fail > 0) copy.FailStep(fail, ErrnoStatus(EIO, "injected"));
    int calls = 0;
    if (!CollectThree(**p, *world_, CountingHooks(&calls, nullptr)).ok()) {
      EXPECT_TRUE(CollectThree(**p, *world_, CountingHooks(&calls, nullptr)).ok());
    }
    return copy.step_log();
  }

  std::shared_ptr<const CollectWorld> world_;
  FaultFs fs_;
};

TEST_F(CollectCrashFindingsTest, FindingEAJournalWhoseFsyncFailedKeepsTheGenerationCollecting) {
  const std::vector<std::string> log = LogOnCopy(0);
  const int64_t renamed = StepOf(log, [](const std::string& l) {
    return Contains(l, "to 3.collecting in node/generations (no replace)");
  });
  ASSERT_GT(renamed, 0);
  const int64_t synced = StepOf(
      log, [](const std::string& l) { return Contains(l, "syncdir node/generations"); }, renamed);
  ASSERT_EQ(synced, renamed + 1);
  absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(fs_, world_->prep);
  ASSERT_TRUE(p.ok()) << p.status();
  fs_.FailStep(synced, ErrnoStatus(EIO, "injected"));
  int calls = 0;
  EXPECT_FALSE(CollectThree(**p, *world_, CountingHooks(&calls, nullptr)).ok());
  ASSERT_TRUE(fs_.Contents(GenerationPath("3.collecting")).ok()) << "the journal is in place";
  EXPECT_EQ((*p)->generations->Find(kCollectedGeneration), nullptr);
  EXPECT_FALSE((*p)->generations->HelperPath(kCollectedGeneration).ok());
  for (const GenerationStatus& s : (*p)->generations->Statuses()) {
    if (s.generation == kCollectedGeneration) {
      EXPECT_EQ(s.state, GenerationState::kCollecting);
    }
  }
  // The next start agrees, and a new collection finishes it.
  p->reset();
  fs_.KillProcess();
  p = StartPrivhelper(fs_, world_->prep);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(CollectThree(**p, *world_, CountingHooks(&calls, nullptr)).ok());
  EXPECT_FALSE(fs_.Contents(ReleasePath("helper")).ok());
}

TEST_F(CollectCrashFindingsTest, FindingFARetryNeverRemovesFilesBesideANativeDoneThatIsNotDurable) {
  const std::vector<std::string> clean = LogOnCopy(0);
  const int64_t rewritten = StepOf(clean, [](const std::string& l) {
    return Contains(l, "to 3.collecting in node/generations") && !Contains(l, "(no replace)");
  });
  ASSERT_GT(rewritten, 0);
  const int64_t synced = rewritten + 1;  // its directory fsync fails
  const std::vector<std::string> retried = LogOnCopy(synced);
  const int64_t marker = StepOf(
      retried,
      [](const std::string& l) { return Contains(l, "create node/generations/.3.dropped"); },
      synced);
  ASSERT_GT(marker, 0);
  absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(fs_, world_->prep);
  ASSERT_TRUE(p.ok()) << p.status();
  fs_.FailStep(synced, ErrnoStatus(EIO, "injected"));
  int calls = 0;
  EXPECT_FALSE(CollectThree(**p, *world_, CountingHooks(&calls, nullptr)).ok());
  EXPECT_EQ(calls, 1);
  // The retry dies before its marker, its files removed; then the power goes, taking every
  // directory operation that was not made durable.
  fs_.CrashAtStep(marker);
  EXPECT_FALSE(CollectThree(**p, *world_, CountingHooks(&calls, nullptr)).ok());
  ASSERT_TRUE(fs_.crashed());
  p->reset();
  fs_.Crash({0, FaultFs::UnsyncedData::kLost});
  p = StartPrivhelper(fs_, world_->prep);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<std::string> text = fs_.Contents(GenerationPath("3.collecting"));
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<CollectionJournal> journal = DecodeCollectionJournal(*text);
  ASSERT_TRUE(journal.ok()) << journal.status();
  const bool files_gone = !fs_.Contents(ReleasePath("helper")).ok();
  EXPECT_TRUE(journal->native_done || !files_gone)
      << "release files removed while the durable journal says the native cleanup never finished";
  calls = 0;
  EXPECT_TRUE(CollectThree(**p, *world_, CountingHooks(&calls, nullptr)).ok());
  EXPECT_EQ(calls, journal->native_done ? 0 : 1);
  EXPECT_FALSE(fs_.Contents(ReleasePath("seccomp.json")).ok());
}

}  // namespace
}  // namespace sn::privhelper::store

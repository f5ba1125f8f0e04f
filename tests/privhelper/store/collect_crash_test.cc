// Crash points of collection on FaultFs: every durable step of CollectGeneration is
// interrupted (a kill -9 and every modelled power loss), fails with EIO and with ENOSPC, runs
// with every fsync failing, and runs out of space, from six starting states
// (collect_crash_cases.h); after each, a restart must find the invariants listed there, a second
// power loss after that restart must not take back what it adopted, and CollectGeneration again
// must finish identically or refuse explicitly. The numbers are printed as "CRASH-POINTS ..."
// lines (docs/formats.md quotes them).
#include <iostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "gtest/gtest.h"
#include "tests/privhelper/store/collect_crash_cases.h"
#include "tests/fakes/crash_points.h"

namespace sn::privhelper::store {

using fs::CleanRun;
using fs::CrashCase;
using fs::ExpectNoViolations;
using fs::FaultFs;
using fs::PointOptions;
using fs::PointReport;
using fs::RunByteBudgets;
using fs::RunClean;
using fs::RunCrashPoints;
using fs::RunEnd;
using fs::RunFailedSyncs;
using fs::RunFaultPoints;
using fs::SecondPowerLoss;
namespace {

class CollectCrashTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    InitLogging("privhelper", LogLevel::kError);
    world_ = MakeCollectWorld();
  }
  static void TearDownTestSuite() { world_.reset(); }

  static void Sweep(CollectStage stage) {
    const CrashCase c = CollectionCase(world_, stage);
    const CleanRun clean = RunClean(c);
    const bool refused = stage == CollectStage::kImportStartedMissing;
    ASSERT_EQ(clean.result.ok(), !refused) << clean.result.status();
    const std::string expected = ExpectedCollectionOutcome(*world_, stage);
    const PointOptions options = {.second_power_loss = SecondPowerLoss::kAlways,
                                  .max_budget_points = 64};
    const PointReport crash = RunCrashPoints(c, options);
    ExpectNoViolations(crash, "crash");
    for (const auto& [adopted, count] : crash.adopted) {
      EXPECT_EQ(adopted, expected) << count << " restart(s)";
    }
    EXPECT_GT(crash.steps, 0);
    ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(EIO, "injected"), options), "eio");
    ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(ENOSPC, "injected"), options), "enospc");
    ExpectNoViolations(RunFailedSyncs(c, ErrnoStatus(EIO, "injected fsync"), options), "fsync");
    if (clean.bytes_written > 0) ExpectNoViolations(RunByteBudgets(c, options), "full");
  }

  static std::shared_ptr<const CollectWorld> world_;
};

std::shared_ptr<const CollectWorld> CollectCrashTest::world_;

// docs/formats.md's order: journal durable, native_done durable, the files removed and their
// directory synced, the marker durable, the journal removed.
TEST_F(CollectCrashTest, EachRecordIsDurableBeforeTheNextStepActsOnIt) {
  const CleanRun clean = RunClean(CollectionCase(world_, CollectStage::kReady));
  ASSERT_TRUE(clean.result.ok()) << clean.result.status();
  std::vector<std::string> order;
  for (size_t i = static_cast<size_t>(clean.start_steps); i < clean.step_log.size(); ++i) {
    const std::string& line = clean.step_log[i];
    const std::string step = line.substr(line.find(' ') + 1);
    if (absl::StartsWith(step, "rename ") || absl::StartsWith(step, "unlink ") ||
        step == "syncdir node/generations" || step == "syncdir releases/rel-1") {
      if (order.empty() || order.back() != step) order.push_back(step);
    }
  }
  std::vector<std::string> kinds;
  for (const std::string& step : order) {
    if (absl::StrContains(step, "to 3.collecting in node/generations (no replace)")) {
      kinds.push_back("journal");
    } else if (absl::StrContains(step, "to 3.collecting in node/generations")) {
      kinds.push_back("native_done");
    } else if (absl::StrContains(step, "to 3.dropped in node/generations (no replace)")) {
      kinds.push_back("marker");
    } else if (step == "unlink node/generations/3.collecting") {
      kinds.push_back("journal removed");
    } else if (absl::StartsWith(step, "unlink node/generations/")) {
      kinds.push_back(step.substr(step.rfind('/') + 1) + " removed");
    } else if (absl::StartsWith(step, "unlink releases/rel-1/")) {
      kinds.push_back(step.substr(step.rfind('/') + 1) + " removed");
    } else {
      kinds.push_back(step.substr(8));  // the directory synced
    }
  }
  // Check() re-opens (and so syncs) the release directory before each file is verified.
  EXPECT_EQ(kinds, (std::vector<std::string>{
                       "releases/rel-1", "journal", "node/generations", "native_done",
                       "node/generations", "releases/rel-1", "helper removed", "releases/rel-1",
                       "seccomp.json removed", "releases/rel-1", "marker", "node/generations",
                       "journal removed", "3.specification removed", "3.images removed",
                       "node/generations"}));
}

// Finding 3 of the second audit: what a drop leaves of generation 3 is its marker and its
// identity records (lease, lease identity, final configuration); its specification, plan and
// images record are reclaimed, only after the marker is durable (the sweeps check every crash
// point of that: collect_crash_cases.h). The same for a plan that never became READY.
TEST_F(CollectCrashTest, ADropLeavesOnlyTheMarkerAndTheIdentityRecords) {
  for (CollectStage stage : {CollectStage::kReady, CollectStage::kPlanNotImported}) {
    const CrashCase c = CollectionCase(world_, stage);
    FaultFs fs(c.fs_options);
    c.setup(fs);
    fs.KillProcess();
    absl::StatusOr<std::string> done = c.operation(fs, [] {});
    ASSERT_TRUE(done.ok()) << CollectStageName(stage) << ": " << done.status();
    absl::StatusOr<std::vector<std::string>> names = fs.Names("node/generations");
    ASSERT_TRUE(names.ok()) << names.status();
    std::set<std::string> three;
    for (const std::string& n : *names) {
      if (absl::StartsWith(n, "3.")) three.insert(n);
    }
    const std::set<std::string> expected =
        stage == CollectStage::kReady
            ? std::set<std::string>{"3.dropped", "3.json", "3.lease", "3.lease-identity"}
            : std::set<std::string>{"3.dropped"};
    EXPECT_EQ(three, expected) << CollectStageName(stage);
    // And so after a power loss and the next start.
    fs.Crash({0, FaultFs::UnsyncedData::kLost});
    RunEnd end;
    end.result = *done;
    absl::StatusOr<std::string> adopted = c.restart(fs, end);
    ASSERT_TRUE(adopted.ok()) << adopted.status();
    EXPECT_EQ(*adopted, ExpectedCollectionOutcome(*world_, stage));
  }
}

// Each fsync of a collection fails, and the retry in the same process is crashed at each of
// its steps: the retry acts only on records that are durable. The fsyncs of a stage are split
// into kRetryParts cases (the i-th fsync in case i % kRetryParts), so that the test's shards
// share the work: as one case, a READY generation's sweep took 276 s on a loaded 2-core machine and ran into the
// shard's timeout.
constexpr int kRetryParts = 8;

class CollectRetryCrashTest : public CollectCrashTest,
                              public ::testing::WithParamInterface<std::tuple<CollectStage, int>> {
};

TEST_P(CollectRetryCrashTest, RetryAfterAFailedFsyncCrashedAnywhereActsOnlyOnDurableRecords) {
  const auto [stage, part] = GetParam();
  const CleanRun clean = RunClean(CollectionCase(world_, stage));
  ASSERT_TRUE(clean.result.ok()) << clean.result.status();
  int64_t fsyncs = 0;
  for (size_t i = static_cast<size_t>(clean.start_steps); i < clean.step_log.size(); ++i) {
    const std::string& line = clean.step_log[i];
    const std::string step = line.substr(line.find(' ') + 1);
    if (!absl::StartsWith(step, "sync")) continue;
    if (fsyncs++ % kRetryParts != part) continue;
    const int64_t k = static_cast<int64_t>(i) + 1 - clean.start_steps;
    const PointReport r = RunCrashPoints(CollectionCase(world_, stage, k),
                                         {.second_power_loss = SecondPowerLoss::kAfterPowerLoss});
    ExpectNoViolations(r, "retry-crash");
    const std::string expected = ExpectedCollectionOutcome(*world_, stage);
    for (const auto& [adopted, count] : r.adopted) EXPECT_EQ(adopted, expected) << count;
  }
  EXPECT_GT(fsyncs, 5);
}

INSTANTIATE_TEST_SUITE_P(
    EveryFsync, CollectRetryCrashTest,
    ::testing::Combine(::testing::Values(CollectStage::kReady, CollectStage::kResumedNativeDone),
                       ::testing::Range(0, kRetryParts)));

TEST_F(CollectCrashTest, ReadyGenerationBesideAnotherLosesOnlyItsOwnFilesAtAnyCrash) {
  Sweep(CollectStage::kReady);
}

TEST_F(CollectCrashTest, PlanWhoseImportNeverStartedIsCollectedAtAnyCrash) {
  Sweep(CollectStage::kPlanNotImported);
}

TEST_F(CollectCrashTest, PlanWhoseImportMayHaveStartedWithAFileMissingStaysRetained) {
  Sweep(CollectStage::kImportStartedMissing);
}

TEST_F(CollectCrashTest, CollectionResumedFromItsJournalFinishesAtAnyCrash) {
  Sweep(CollectStage::kResumed);
}

TEST_F(CollectCrashTest, CollectionResumedAfterNativeDoneNeverRunsTheNativeCleanupAgain) {
  Sweep(CollectStage::kResumedNativeDone);
}

TEST_F(CollectCrashTest, StartClearingAJournalBesideItsMarkerKeepsTheGenerationDropped) {
  Sweep(CollectStage::kStartClearsJournal);
}

}  // namespace
}  // namespace sn::privhelper::store

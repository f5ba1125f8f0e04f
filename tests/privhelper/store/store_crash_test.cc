// Crash points of privhelper's store on FaultFs: every durable step of each operation is
// interrupted (a kill -9 and every modelled power loss), fails with EIO or ENOSPC, runs with
// every fsync failing, and runs out of space; after each, a restart must find the invariants
// of store_crash_cases.h, and a second power loss after that restart must not take back what
// it adopted. The numbers are printed as "CRASH-POINTS ..." lines and recorded as test
// properties (docs/formats.md quotes them).
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/fakes/crash_points.h"
#include "tests/privhelper/store/store_crash_cases.h"

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
using fs::RunFailedSyncs;
using fs::RunFaultPoints;
using fs::SecondPowerLoss;
namespace {

const std::string kOld = "{\"record\":\"old\"}\n";
const std::string kFresh = "{\"record\":\"new, and longer than the old one\"}\n";

// Every kind of injection, each step of `c`.
void SweepAll(const CrashCase& c, const PointOptions& options = {}, bool crash = true) {
  if (crash) ExpectNoViolations(RunCrashPoints(c, options), "crash");
  ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(EIO, "injected"), options),
                     "eio");
  ExpectNoViolations(
      RunFaultPoints(c, ErrnoStatus(ENOSPC, "injected"), options), "enospc");
  ExpectNoViolations(RunFailedSyncs(c, ErrnoStatus(EIO, "injected fsync"), options), "fsync");
  if (RunClean(c).bytes_written > 0) ExpectNoViolations(RunByteBudgets(c, options), "full");
}

// The kinds of the clean run's steps after the start, in order ("create", "append", ...).
std::vector<std::string> StepKinds(const CrashCase& c) {
  const CleanRun clean = RunClean(c);
  std::vector<std::string> out;
  for (size_t i = static_cast<size_t>(clean.start_steps); i < clean.step_log.size(); ++i) {
    const std::string& line = clean.step_log[i];
    const size_t a = line.find(' ') + 1;
    out.push_back(line.substr(a, line.find(' ', a) - a));
  }
  return out;
}

// Thousands of restarts each log a preparation: keep the test log readable.
class StoreCrashTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    InitLogging("privhelper", LogLevel::kError);
    world_ = MakePrepWorld();
  }
  static void TearDownTestSuite() { world_.reset(); }

  // The preparation sweeps (the byte budget at 64 points spread over the bytes written), and
  // the outcomes the crash sweep's restarts reached: READY every time, but where the operation
  // creates the lease, whose crashes before its identity is durable leave it FAILED.
  static void SweepPreparation(PrepStage stage, bool with_held = false) {
    const CrashCase c = PreparationCase(world_, stage, with_held);
    const CleanRun clean = RunClean(c);
    ASSERT_TRUE(clean.result.ok()) << clean.result.status();
    const PointOptions options = {.second_power_loss = SecondPowerLoss::kAlways,
                                  .max_budget_points = 64};
    const PointReport crash = RunCrashPoints(c, options);
    ExpectNoViolations(crash, "crash");
    int64_t ready = 0, failed = 0;
    for (const auto& [adopted, count] : crash.adopted) {
      if (adopted == "FAILED ownership_refused") {
        failed += count;
      } else {
        EXPECT_EQ(adopted, absl::StrCat("READY ", Sha256Hex(world_->target.final_record)));
        ready += count;
      }
    }
    std::cout << "OUTCOMES " << c.name << ": READY " << ready << ", FAILED " << failed
              << std::endl;
    EXPECT_GT(ready, 0);
    const bool creates_lease = stage == PrepStage::kFinish || stage == PrepStage::kWhole;
    if (creates_lease) {
      EXPECT_GT(failed, 0) << "no crash left a lease without its identity";
    } else {
      EXPECT_EQ(failed, 0);
    }
    SweepAll(c, options, /*crash=*/false);
  }

  static std::shared_ptr<const PrepWorld> world_;
};

std::shared_ptr<const PrepWorld> StoreCrashTest::world_;

const std::vector<std::string> kPublication = {"create", "append", "sync", "rename", "syncdir"};

TEST_F(StoreCrashTest, PublishOnceOfANewRecordLeavesNothingOrTheWholeRecord) {
  const CrashCase c = PublishOnceCase("", kFresh);
  EXPECT_EQ(StepKinds(c), kPublication);  // formats.md: temp, fsync, rename, fsync(dir)
  ASSERT_TRUE(RunClean(c).result.ok());
  SweepAll(c);
}

TEST_F(StoreCrashTest, PublishOnceOverAnExistingRecordNeverReplacesIt) {
  const CrashCase c = PublishOnceCase(kOld, kFresh);
  EXPECT_EQ(RunClean(c).result.status().code(), absl::StatusCode::kAlreadyExists);
  SweepAll(c);
}

TEST_F(StoreCrashTest, PublishReplacingLeavesTheOldOrTheNewRecordNeverATornOne) {
  const CrashCase c = PublishReplacingCase(kOld, kFresh);
  EXPECT_EQ(StepKinds(c), kPublication);
  ASSERT_TRUE(RunClean(c).result.ok());
  SweepAll(c);
}

TEST_F(StoreCrashTest, PublishReplacingOfANewRecordLeavesNothingOrTheWholeRecord) {
  const CrashCase c = PublishReplacingCase("", kFresh);
  ASSERT_TRUE(RunClean(c).result.ok());
  SweepAll(c);
}

TEST_F(StoreCrashTest, FirstStartNeverHasTwoIdentitiesNorAdoptsATornOneNorKeepsTemporaries) {
  const CrashCase c = InstallationCase();
  EXPECT_EQ(StepKinds(c), kPublication);
  ASSERT_TRUE(RunClean(c).result.ok());
  SweepAll(c);
}

TEST_F(StoreCrashTest, FirstStartCreatesItsDirectoriesDurablyOrStartsAgain) {
  SweepPreparation(PrepStage::kStart);
}

TEST_F(StoreCrashTest, StartFindingAFinalConfigurationBesideItsPlanKeepsTheGenerationReady) {
  SweepPreparation(PrepStage::kStartClearsPlan);
}

TEST_F(StoreCrashTest, AdoptLeavesTheReleaseAbsentOrExactlyTheAdoptedBytes) {
  SweepPreparation(PrepStage::kAdopt);
}

TEST_F(StoreCrashTest, BeginLeavesNothingOrAPlanThatMatchesItsSpecification) {
  SweepPreparation(PrepStage::kBegin);
}

TEST_F(StoreCrashTest, BeginResumedAfterARestartFindsTheSameRecords) {
  SweepPreparation(PrepStage::kResume);
}

TEST_F(StoreCrashTest, ImageArchiveIsAbsentOrStoredCompleteAndVerified) {
  SweepPreparation(PrepStage::kPutImage);
}

TEST_F(StoreCrashTest, ImageArchiveLoadedWhileItStreamsLeavesItsPlanMarkedOrUnchanged) {
  SweepPreparation(PrepStage::kPutImageOverlapped);
}

TEST_F(StoreCrashTest, RuntimeHelperIsAbsentOrStoredCompleteAndVerified) {
  SweepPreparation(PrepStage::kPutHelper);
}

TEST_F(StoreCrashTest, FinishLeavesTheGenerationPreparingReadyOrRefusedNeverHalfAdopted) {
  SweepPreparation(PrepStage::kFinish);
}

TEST_F(StoreCrashTest, WholePreparationInterruptedAnywhereCompletesOrRefusesExplicitly) {
  SweepPreparation(PrepStage::kWhole);
}

TEST_F(StoreCrashTest, PreparationInterruptedAnywhereLeavesAReadyGenerationAsItWas) {
  SweepPreparation(PrepStage::kWhole, /*with_held=*/true);
}

}  // namespace
}  // namespace sn::privhelper::store

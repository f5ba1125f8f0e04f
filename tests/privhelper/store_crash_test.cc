// Crash points of privhelper's store on FaultFs: every durable step of each operation is
// interrupted (a kill -9 and every modelled power loss), fails with EIO or ENOSPC, runs with
// every fsync failing, and runs out of space at every byte; after each, a restart must find
// the invariants of store_crash_cases.h. The numbers are printed as "CRASH-POINTS ..." lines
// and recorded as test properties.
//
// Known gaps, proven by store_crash_findings_test: a start adopts a record whose directory
// entry was never made durable (so these sweeps run the second power loss only after restarts
// that followed a power loss), and the findings listed there.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "gtest/gtest.h"
#include "tests/privhelper/crash_points.h"
#include "tests/privhelper/store_crash_cases.h"

namespace sn::privhelper::store {
namespace {

const std::string kOld = "{\"record\":\"old\"}\n";
const std::string kFresh = "{\"record\":\"new, and longer than the old one\"}\n";

// Every kind of injection, each step of `c`.
void SweepAll(const CrashCase& c, const PointOptions& options) {
  ExpectNoViolations(RunCrashPoints(c, options), "crash");
  ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(EIO, "injected"), options), "eio");
  ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(ENOSPC, "injected"), options), "enospc");
  ExpectNoViolations(RunFailedSyncs(c, ErrnoStatus(EIO, "injected fsync"), options), "fsync");
  if (RunClean(c).bytes_written > 0) ExpectNoViolations(RunByteBudgets(c, options), "full");
}

// The kinds of the clean run's steps, in order ("create", "append", "sync", ...).
std::vector<std::string> StepKinds(const CrashCase& c) {
  std::vector<std::string> out;
  for (const std::string& line : RunClean(c).step_log) {
    const size_t a = line.find(' ') + 1;
    out.push_back(line.substr(a, line.find(' ', a) - a));
  }
  return out;
}

// Thousands of restarts each log a registration: keep the test log readable.
class StoreCrashTest : public ::testing::Test {
 protected:
  void SetUp() override { InitLogging("privhelper", LogLevel::kError); }
};

const std::vector<std::string> kPublication = {"create", "append", "sync", "rename", "syncdir"};

TEST_F(StoreCrashTest, PublishOnceOfANewRecordLeavesNothingOrTheWholeRecord) {
  const CrashCase c = PublishOnceCase("", kFresh);
  EXPECT_EQ(StepKinds(c), kPublication);  // formats.md: temp, fsync, rename, fsync(dir)
  ASSERT_TRUE(RunClean(c).result.ok());
  SweepAll(c, {SecondPowerLoss::kAlways});
}

TEST_F(StoreCrashTest, PublishOnceOverAnExistingRecordNeverReplacesIt) {
  const CrashCase c = PublishOnceCase(kOld, kFresh);
  EXPECT_EQ(RunClean(c).result.status().code(), absl::StatusCode::kAlreadyExists);
  SweepAll(c, {SecondPowerLoss::kAlways});
}

TEST_F(StoreCrashTest, PublishReplacingLeavesTheOldOrTheNewRecordNeverATornOne) {
  const CrashCase c = PublishReplacingCase(kOld, kFresh);
  EXPECT_EQ(StepKinds(c), kPublication);
  ASSERT_TRUE(RunClean(c).result.ok());
  SweepAll(c, {SecondPowerLoss::kAlways});
}

TEST_F(StoreCrashTest, PublishReplacingOfANewRecordLeavesNothingOrTheWholeRecord) {
  const CrashCase c = PublishReplacingCase("", kFresh);
  ASSERT_TRUE(RunClean(c).result.ok());
  SweepAll(c, {SecondPowerLoss::kAlways});
}

TEST_F(StoreCrashTest, FirstStartNeverHasTwoIdentitiesNorAdoptsATornOne) {
  const CrashCase c = InstallationCase(/*temporaries_removed=*/false);
  EXPECT_EQ(StepKinds(c), kPublication);
  ASSERT_TRUE(RunClean(c).result.ok());
  SweepAll(c, {SecondPowerLoss::kAfterPowerLoss});
}

TEST_F(StoreCrashTest, OpenOnAnEmptyStateAlwaysStartsAgain) {
  const CrashCase c = OpenCase();
  // node/ and node/generations/ are each created and their parent fsynced.
  EXPECT_EQ(StepKinds(c), (std::vector<std::string>{"mkdir", "syncdir", "mkdir", "syncdir"}));
  ASSERT_TRUE(RunClean(c).result.ok());
  SweepAll(c, {SecondPowerLoss::kAfterPowerLoss});
}

TEST_F(StoreCrashTest, RegisterLeavesTheGenerationHeldExactlyOrCompletableAndOtherBytesRefused) {
  // From a state whose node/generations/ is durable (see the findings test for an empty one).
  const CrashCase c = RegisterCase(/*from_empty_state=*/false);
  // The specification, then the final configuration, each a full publication.
  std::vector<std::string> want = kPublication;
  want.insert(want.end(), kPublication.begin(), kPublication.end());
  EXPECT_EQ(StepKinds(c), want);
  ASSERT_TRUE(RunClean(c).result.ok());
  SweepAll(c, {SecondPowerLoss::kAfterPowerLoss});
}

}  // namespace
}  // namespace sn::privhelper::store

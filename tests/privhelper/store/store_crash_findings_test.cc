// Regression of finding D of the crash sweeps (fixed): a start ignored a failed fsync of a
// release source directory. ReleaseStore::Open opens every releases/<source>/ with
// OpenPrivateSubdir, which fsyncs releases/ and the source before anything is read, and then
// removes the source's stray temporaries; it used to drop any error of that open
// (`if (d.ok()) ...`), so an EIO or ENOSPC from either fsync was never reported. Now only a
// source that is not a private directory is skipped (it is refused, as ownership_refused, when
// a preparation reads it) and every other error stops the start.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "gtest/gtest.h"
#include "tests/fakes/crash_points.h"
#include "tests/fakes/fault_fs.h"
#include "tests/privhelper/store/prep_crash_world.h"
#include "tests/privhelper/store/store_crash_cases.h"

namespace sn::privhelper::store {

using fs::CrashCase;
using fs::ExpectNoViolations;
using fs::FaultFs;
using fs::RunFaultPoints;
namespace {

class StoreCrashFindingsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    InitLogging("privhelper", LogLevel::kError);
    world_ = MakePrepWorld();
  }
  static void TearDownTestSuite() { world_.reset(); }
  static std::shared_ptr<const PrepWorld> world_;
};

std::shared_ptr<const PrepWorld> StoreCrashFindingsTest::world_;

// Finding D: each fsync of a start that opens an existing release source, failing.
TEST_F(StoreCrashFindingsTest, StartReportsAFailedFsyncOfAReleaseSource) {
  FaultFs fs;
  ASSERT_TRUE(WriteInstallation(fs).ok());
  {
    absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(fs, *world_);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(AdoptRelease(**p, *world_).ok());  // releases/rel-1/ exists
  }
  fs.KillProcess();
  ASSERT_TRUE(StartPrivhelper(fs, *world_).ok());
  const std::vector<std::string> log = fs.step_log();
  int checked = 0;
  for (size_t k = 0; k < log.size(); ++k) {
    if (!absl::StrContains(log[k], "syncdir releases")) continue;
    fs.KillProcess();
    fs.FailStep(static_cast<int64_t>(k) + 1, ErrnoStatus(EIO, "injected"));
    absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(fs, *world_);
    ASSERT_EQ(fs.faults_injected(), 1) << log[k];
    EXPECT_FALSE(p.ok()) << "the start swallowed the failure of " << log[k];
    ++checked;
  }
  // releases/ when the store opens it, then releases/ again as the source's parent and
  // releases/rel-1/ (the two the finding swallowed).
  EXPECT_EQ(checked, 3);
}

// Finding D through the sweep: every failed step of a start is reported.
TEST_F(StoreCrashFindingsTest, EveryFailedStepOfAStartIsReported) {
  const CrashCase c = PreparationCase(world_, PrepStage::kStartClearsPlan);
  ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(EIO, "injected")), "eio");
  ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(ENOSPC, "injected")), "enospc");
}

}  // namespace
}  // namespace sn::privhelper::store

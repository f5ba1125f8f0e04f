// Recovery of privhelper's preparation on FaultFs beyond the sweeps of store_crash_test: a
// preparation retried in the same process after any failed step, the order in which Finish
// makes its records durable, a lease replaced with a reused inode number, and the regressions
// of the store findings fixed on branch prep (A: nothing adopted that was not durable; B: a
// final configuration an earlier attempt published is adopted; C: stray temporaries removed).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "gtest/gtest.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/lease.h"
#include "privhelper/store/prep_failure.h"
#include "tests/fakes/fault_fs.h"
#include "tests/privhelper/store/prep_crash_world.h"

namespace sn::privhelper::store {

using fs::FaultFs;
namespace {

class StoreRecoveryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    InitLogging("privhelper", LogLevel::kError);
    world_ = MakePrepWorld();
  }
  static void TearDownTestSuite() { world_.reset(); }

  // privhelper started on `fs` (fails the test when it does not start).
  static std::unique_ptr<Privhelper> Start(FaultFs& fs) {
    absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(fs, *world_);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }
  // A state directory with its installation identity, started once (the directories exist).
  static void Started(FaultFs& fs) {
    ASSERT_TRUE(WriteInstallation(fs).ok());
    ASSERT_NE(Start(fs), nullptr);
    fs.KillProcess();
  }
  static absl::Status Prepare(Privhelper& p) {
    return store::Prepare(p, *world_, world_->target, *world_->NewImporter());
  }
  // What a start finds of the target (Inspect checks every invariant first).
  static Observed::State StateAfterStart(FaultFs& fs) {
    std::unique_ptr<Privhelper> p = Start(fs);
    if (p == nullptr) return Observed::State::kAbsent;
    absl::StatusOr<Observed> o = Inspect(fs, *p, *world_, /*expect_held=*/false);
    EXPECT_TRUE(o.ok()) << o.status() << "\n" << fs.Dump();
    return o.ok() ? o->state : Observed::State::kAbsent;
  }
  // The index in `log` of the first line at or after `from` containing every part.
  static size_t Find(const std::vector<std::string>& log, size_t from,
                     const std::vector<std::string>& parts) {
    for (size_t i = from; i < log.size(); ++i) {
      if (std::all_of(parts.begin(), parts.end(),
                      [&](const std::string& p) { return absl::StrContains(log[i], p); })) {
        return i;
      }
    }
    return log.size();
  }

  static std::shared_ptr<const PrepWorld> world_;
};

std::shared_ptr<const PrepWorld> StoreRecoveryTest::world_;

// The steps of a whole preparation after the start, as the clean run logs them.
std::vector<std::string> PreparationSteps(const PrepWorld& w, int64_t* start_steps) {
  FaultFs fs;
  EXPECT_TRUE(WriteInstallation(fs).ok());
  absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(fs, w);
  EXPECT_TRUE(p.ok());
  *start_steps = fs.steps();
  EXPECT_TRUE(Prepare(**p, w, w.target, *w.NewImporter()).ok());
  std::vector<std::string> log = fs.step_log();
  return std::vector<std::string>(log.begin() + *start_steps, log.end());
}

TEST_F(StoreRecoveryTest, FinishMakesEachRecordDurableBeforeTheNextOne) {
  int64_t start = 0;
  const std::vector<std::string> log = PreparationSteps(*world_, &start);
  const std::string g = "node/generations";
  // docs/formats.md: plan (import_started true) durable, then the lease created, fsynced and
  // its directory fsynced, then the identity published, then the final configuration, then
  // the plan removed — each followed by the fsync of node/generations.
  const size_t planned = Find(log, 0, {"rename .3.preparing.tmp.", "to 3.preparing"});
  ASSERT_LT(planned, log.size()) << "no plan published";
  size_t i = Find(log, planned + 1, {"rename .3.preparing.tmp.", "to 3.preparing"});
  ASSERT_LT(i, log.size()) << "the plan was not rewritten before the import";
  const std::vector<std::vector<std::string>> order = {
      {"syncdir " + g},
      {"create " + g + "/3.lease"},
      {"sync inode"},
      {"syncdir " + g},
      {"create " + g + "/.3.lease-identity.tmp."},
      {"sync inode"},
      {"rename .3.lease-identity.tmp.", "(no replace)"},
      {"syncdir " + g},
      {"create " + g + "/.3.json.tmp."},
      {"sync inode"},
      {"rename .3.json.tmp.", "to 3.json", "(no replace)"},
      {"syncdir " + g},
      {"unlink " + g + "/3.preparing"},
      {"syncdir " + g},
  };
  for (const std::vector<std::string>& step : order) {
    const size_t next = Find(log, i + 1, step);
    ASSERT_LT(next, log.size()) << "no \"" << step[0] << "\" after step " << log[i];
    i = next;
  }
  EXPECT_EQ(i + 1, log.size()) << "steps after the plan's removal was durable";
}

TEST_F(StoreRecoveryTest, PreparationRetriedInTheSameProcessAfterAnyFailedStepCompletesOrRefuses) {
  int64_t start = 0;
  const std::vector<std::string> log = PreparationSteps(*world_, &start);
  // The window in which a lease exists without a durable identity: after the lease's creation
  // up to the identity's rename. Only failures there may make the retry refuse.
  const size_t lease = Find(log, 0, {"create node/generations/3.lease"});
  const size_t identity = Find(log, lease, {"rename .3.lease-identity.tmp."});
  ASSERT_LT(identity, log.size());
  int completed = 0, refused = 0;
  for (const absl::Status& fault : {ErrnoStatus(EIO, "injected"), ErrnoStatus(ENOSPC, "injected")}) {
    for (size_t k = 0; k < log.size(); ++k) {
      SCOPED_TRACE(absl::StrCat("step ", k + 1, " (", log[k], ") failed with ", fault.ToString()));
      FaultFs fs;
      ASSERT_TRUE(WriteInstallation(fs).ok());
      std::unique_ptr<Privhelper> p = Start(fs);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(fs.steps(), start);
      fs.FailStep(start + static_cast<int64_t>(k) + 1, fault);
      const absl::Status first = Prepare(*p);
      ASSERT_EQ(fs.faults_injected(), 1);
      if (first.ok()) {
        // Only the removal of a temporary may fail unreported (best-effort cleanup).
        EXPECT_TRUE(absl::StrContains(log[k], "unlink") && absl::StrContains(log[k], ".tmp."));
      }
      const absl::Status retry = Prepare(*p);
      if (retry.ok()) {
        ++completed;
        EXPECT_NE(p->generations->Find(kCaseGeneration), nullptr);
        EXPECT_FALSE(k > lease && k <= identity) << "a lease without its identity was adopted";
        // What the retry reported READY is durable.
        p.reset();
        fs.Crash();
        EXPECT_EQ(StateAfterStart(fs), Observed::State::kReady) << fs.Dump();
        continue;
      }
      ++refused;
      EXPECT_TRUE(absl::IsFailedPrecondition(retry)) << retry;
      EXPECT_EQ(PrepDiagnosticOf(retry), Diagnostic::kOwnershipRefused) << retry;
      EXPECT_TRUE(k > lease && k <= identity) << "refused outside the lease's window: " << retry;
      // Kept for inspection: the next start (privhelper restarted) refuses it too.
      p.reset();
      fs.KillProcess();
      EXPECT_EQ(StateAfterStart(fs), Observed::State::kFailed) << fs.Dump();
    }
  }
  std::cout << "RETRIES " << log.size() << " steps x 2 faults: completed " << completed
            << ", refused (a lease without its identity) " << refused << std::endl;
  EXPECT_EQ(refused, 2 * static_cast<int>(identity - lease));
}

// The lease's identity binds its birth time: a lease replaced by a file that got the same
// inode number (the kernel reuses freed numbers) is refused.
TEST_F(StoreRecoveryTest, LeaseReplacedByAFileWithTheReusedInodeNumberIsRefused) {
  FaultFs fs;
  Started(fs);
  {
    std::unique_ptr<Privhelper> p = Start(fs);
    ASSERT_TRUE(Prepare(*p).ok());
  }
  fs.KillProcess();
  const std::string lease = absl::StrCat("node/generations/", LeaseName(kCaseGeneration));
  Dir root = *fs.Root();
  Dir gens = *fs.OpenDirAt(*fs.OpenDirAt(root, "node"), "generations");
  const FileInfo before = *fs.StatAt(gens, LeaseName(kCaseGeneration));
  ASSERT_TRUE(fs.Remove(lease).ok());
  ASSERT_TRUE(fs.WriteFile(lease, "").ok());
  const FileInfo after = *fs.StatAt(gens, LeaseName(kCaseGeneration));
  ASSERT_EQ(after.ino, before.ino) << "the inode number was not reused";
  ASSERT_EQ(after.dev, before.dev);
  EXPECT_NE(after.birth_ns, before.birth_ns);
  std::unique_ptr<Privhelper> p = Start(fs);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->generations->Find(kCaseGeneration), nullptr);
  const std::vector<GenerationStatus> statuses = p->generations->Statuses();
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].state, GenerationState::kFailed);
  EXPECT_EQ(statuses[0].diagnostic, Diagnostic::kOwnershipRefused);
}

// Finding A (fixed): the installation identity a start adopted after a kill that came before
// the state directory's fsync survives a later power loss. (The fsync is the real
// OpenStateDir's, privhelper/store/state_dir.h, which OpenStateDir here models: LoadOrCreateInstallationId relies on it.)
TEST_F(StoreRecoveryTest, IdentityAdoptedAfterAKillIsTheOneAfterALaterPowerLoss) {
  FaultFs fs;
  auto identity = [&fs]() -> absl::StatusOr<std::string> {
    absl::StatusOr<Dir> root = OpenStateDir(fs);
    if (!root.ok()) return root.status();
    return LoadOrCreateInstallationId(fs, *root, kOwner);
  };
  fs.CrashAtStep(6);  // 1 syncdir(state), then create, append, sync, rename; killed before 6
  ASSERT_FALSE(identity().ok());
  ASSERT_EQ(fs.step_log().back().substr(0, 9), "6 syncdir");
  fs.KillProcess();
  absl::StatusOr<std::string> first = identity();
  ASSERT_TRUE(first.ok()) << first.status();
  fs.Crash();
  absl::StatusOr<std::string> second = identity();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, *first) << "two installation identities";
}

// Finding A (fixed), node/ and node/generations/: a first start killed after creating them and
// before their parents were durable, a start that completes a preparation, a power loss: the
// generation is still READY.
TEST_F(StoreRecoveryTest, ReadyGenerationSurvivesAPowerLossAfterAFirstStartWasKilled) {
  FaultFs probe;
  ASSERT_TRUE(WriteInstallation(probe).ok());
  ASSERT_NE(Start(probe), nullptr);
  const std::vector<std::string> log = probe.step_log();
  for (size_t k = 0; k < log.size(); ++k) {
    if (!absl::StrContains(log[k], "mkdir")) continue;
    SCOPED_TRACE(log[k]);
    FaultFs fs;
    ASSERT_TRUE(WriteInstallation(fs).ok());
    fs.CrashAtStep(static_cast<int64_t>(k) + 2);  // killed right after the mkdir
    ASSERT_FALSE(StartPrivhelper(fs, *world_).ok());
    fs.KillProcess();
    {
      std::unique_ptr<Privhelper> p = Start(fs);
      ASSERT_NE(p, nullptr);
      ASSERT_TRUE(Prepare(*p).ok());
    }
    fs.Crash();
    EXPECT_EQ(StateAfterStart(fs), Observed::State::kReady) << fs.Dump();
  }
}

// Finding A (fixed), <g>.json: a generation a start found READY after a kill before the final
// configuration's directory fsync is still READY after a later power loss.
TEST_F(StoreRecoveryTest, GenerationReadyAfterAKillIsStillReadyAfterALaterPowerLoss) {
  int64_t start = 0;
  const std::vector<std::string> log = PreparationSteps(*world_, &start);
  const size_t final_rename = Find(log, 0, {"rename .3.json.tmp."});
  ASSERT_LT(final_rename + 1, log.size());
  FaultFs fs;
  Started(fs);
  std::unique_ptr<Privhelper> p = Start(fs);
  fs.CrashAtStep(fs.steps() + static_cast<int64_t>(final_rename) + 2);  // its syncdir
  ASSERT_FALSE(Prepare(*p).ok());
  p.reset();
  fs.KillProcess();
  ASSERT_EQ(StateAfterStart(fs), Observed::State::kReady);  // served, reported ready
  fs.Crash();
  EXPECT_EQ(StateAfterStart(fs), Observed::State::kReady)
      << "a generation privhelper held and served is no longer held";
}

// Finding B's analogue (Register is gone): Finish retried in the same process after the final
// configuration was renamed into place and its directory fsync failed adopts that record.
TEST_F(StoreRecoveryTest, FinishRetriedAfterTheFinalConfigurationsDirectoryFsyncFailedIsAdopted) {
  int64_t start = 0;
  const std::vector<std::string> log = PreparationSteps(*world_, &start);
  const size_t final_sync = Find(log, Find(log, 0, {"rename .3.json.tmp."}), {"syncdir"});
  ASSERT_LT(final_sync, log.size());
  FaultFs fs;
  Started(fs);
  std::unique_ptr<Privhelper> p = Start(fs);
  fs.FailStep(fs.steps() + static_cast<int64_t>(final_sync) + 1, ErrnoStatus(EIO, "injected"));
  ASSERT_FALSE(Prepare(*p).ok());
  ASSERT_EQ(fs.faults_injected(), 1);
  ASSERT_TRUE(fs.Contents("node/generations/3.json").ok()) << "the rename happened";
  absl::Status retry = FinishPreparation(*p, kCaseGeneration, *world_->NewImporter());
  ASSERT_TRUE(retry.ok()) << retry;
  EXPECT_NE(p->generations->Find(kCaseGeneration), nullptr);
  EXPECT_EQ(*fs.Contents("node/generations/3.json"), world_->target.final_record);
  p.reset();
  fs.Crash();
  EXPECT_EQ(StateAfterStart(fs), Observed::State::kReady);
}

// Finding C (fixed): temporaries a crash leaves in the state directory, node/generations/ and
// a release source are removed by the next start (Inspect refuses any that remain).
TEST_F(StoreRecoveryTest, StartRemovesTemporariesACrashLeftBehind) {
  int64_t start = 0;
  const std::vector<std::string> log = PreparationSteps(*world_, &start);
  int crashes = 0;
  for (size_t k = 0; k < log.size(); ++k) {
    if (!absl::StrContains(log[k], "append")) continue;  // a temporary exists, half written
    SCOPED_TRACE(log[k]);
    FaultFs fs;
    Started(fs);
    std::unique_ptr<Privhelper> p = Start(fs);
    fs.CrashAtStep(fs.steps() + static_cast<int64_t>(k) + 1);
    ASSERT_FALSE(Prepare(*p).ok());
    p.reset();
    fs.KillProcess();
    StateAfterStart(fs);
    ++crashes;
  }
  EXPECT_GE(crashes, 8);  // metadata (3), specification, plan (2), artifacts, identity, final
  // The installation identity's own temporary, in the state directory.
  FaultFs fs;
  fs.CrashAtStep(3);  // syncdir(state), create, then the kill at the append
  absl::StatusOr<Dir> root = OpenStateDir(fs);
  ASSERT_TRUE(root.ok());
  ASSERT_FALSE(LoadOrCreateInstallationId(fs, *root, kOwner).ok());
  fs.KillProcess();
  absl::StatusOr<Dir> again = OpenStateDir(fs);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(LoadOrCreateInstallationId(fs, *again, kOwner).ok());
  EXPECT_EQ(*fs.Names(""), std::vector<std::string>{kInstallationFile}) << fs.Dump();
}

}  // namespace
}  // namespace sn::privhelper::store

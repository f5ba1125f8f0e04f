// The crash-point harness catches what it is for: each test runs a deliberately broken
// publication (or reader) through it and expects the violation a real crash would cause.
#include "tests/fakes/crash_points.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "privhelper/store/durable.h"
#include "tests/privhelper/store/store_crash_cases.h"

namespace sn::privhelper::store {

using fs::CleanRun;
using fs::CrashCase;
using fs::FaultFs;
using fs::FaultSampleFromEnvironment;
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

const std::string kOld = "old record\n";
const std::string kFresh = "fresh record\n";

struct Flaws {
  bool sync_file = true;
  bool check_sync = true;
  bool no_replace = true;
  bool sync_dir = true;
};

// The publication of durable.h with chosen steps left out, into recs/r.
absl::StatusOr<std::string> FlawedPublish(FaultFs& fs, const Flaws& f) {
  ASSIGN_OR_RETURN(Dir root, fs.Root());
  ASSIGN_OR_RETURN(Dir dir, fs.OpenDirAt(root, "recs"));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> w, fs.CreateExclusiveAt(dir, ".r.tmp.1", 0600));
  RETURN_IF_ERROR(w->Append(kFresh));
  if (f.sync_file) {
    absl::Status s = w->Sync();
    if (f.check_sync) RETURN_IF_ERROR(s);
  }
  RETURN_IF_ERROR(w->Close());
  RETURN_IF_ERROR(fs.RenameAt(dir, ".r.tmp.1", "r", f.no_replace));
  if (f.sync_dir) RETURN_IF_ERROR(fs.SyncDir(dir));
  return std::string();
}

// FlawedPublish as a crash case's operation.
std::function<absl::StatusOr<std::string>(FaultFs&, const std::function<void()>&)> Flawed(
    Flaws f) {
  return [f](FaultFs& fs, const std::function<void()>&) { return FlawedPublish(fs, f); };
}

// This framework's own tests count points: every one, whatever SN_FAULT_POINT_SAMPLE says.
PointOptions Every() { return {.fault_sample = 1}; }

bool AnyContains(const PointReport& r, const std::string& what) {
  return std::any_of(r.violations.begin(), r.violations.end(),
                     [&](const std::string& v) { return absl::StrContains(v, what); });
}

TEST(CrashPointsTest, CountsEveryMutatingStepAndAPointAfterCompletion) {
  CrashCase c = PublishOnceCase("", kFresh);
  c.operation = Flawed({});
  const PointReport r = RunCrashPoints(c);
  EXPECT_EQ(r.steps, 5);  // create, append, sync, rename, syncdir
  EXPECT_EQ(r.points, 6);
  EXPECT_EQ(r.triggered, 5);
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
}

TEST(CrashPointsTest, RenameBeforeTheFileIsSyncedAdoptsAnEmptyRecord) {
  CrashCase c = PublishOnceCase("", kFresh);
  c.operation = Flawed({.sync_file = false});
  const PointReport r = RunCrashPoints(c);
  EXPECT_TRUE(AnyContains(r, "the record holds \"\"")) << r.Summary();
}

TEST(CrashPointsTest, MissingDirectorySyncLosesAPublicationThatReturnedOk) {
  CrashCase c = PublishOnceCase("", kFresh);
  c.operation = Flawed({.sync_dir = false});
  const PointReport r = RunCrashPoints(c);
  EXPECT_TRUE(AnyContains(r, "returned OK but the record is absent")) << r.Summary();
}

TEST(CrashPointsTest, WriteOnceByAPlainRenameReplacesTheRecord) {
  CrashCase c = PublishOnceCase(kOld, kFresh);
  c.operation = Flawed({.no_replace = false});
  const PointReport r = RunCrashPoints(c);
  EXPECT_TRUE(AnyContains(r, "neither the old")) << r.Summary();
}

TEST(CrashPointsTest, IgnoredFsyncFailureIsReported) {
  CrashCase c = PublishOnceCase("", kFresh);
  c.operation = Flawed({.check_sync = false});
  const PointReport r = RunFaultPoints(c, ErrnoStatus(EIO, "injected"), Every());
  EXPECT_TRUE(AnyContains(r, "a step failed but the operation reported success")) << r.Summary();
  // ...and what it then reports as published is lost by a power loss.
  EXPECT_TRUE(AnyContains(r, "the record holds \"\"")) << r.Summary();
}

TEST(CrashPointsTest, AReaderThatAdoptsAnUnsyncedEntryIsCaughtByTheSecondPowerLoss) {
  CrashCase c = PublishOnceCase("", kFresh);
  c.restart = [](FaultFs& fs, const RunEnd&) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, fs.Root());
    ASSIGN_OR_RETURN(Dir dir, fs.OpenDirAt(root, "recs"));
    absl::StatusOr<std::string> rec = ReadPrivateRecord(fs, dir, "r", 4096, kOwner);
    if (absl::IsNotFound(rec.status())) return std::string();
    return rec;  // adopted without making the entry durable
  };
  EXPECT_TRUE(RunCrashPoints(c, {SecondPowerLoss::kAfterPowerLoss}).violations.empty());
  const PointReport r = RunCrashPoints(c, {SecondPowerLoss::kAlways});
  EXPECT_TRUE(AnyContains(r, "what the first restart adopted was not durable")) << r.Summary();
}

TEST(CrashPointsTest, StartedArmsTheInjectionOnceTheStartIsOver) {
  CrashCase c = PublishOnceCase("", kFresh);
  c.operation = [](FaultFs& fs, const std::function<void()>& started)
      -> absl::StatusOr<std::string> {
    // A "start" of two steps that no injection may hit, then the publication.
    ASSIGN_OR_RETURN(Dir root, fs.Root());
    RETURN_IF_ERROR(fs.MakeDirAt(root, "start", 0700));
    RETURN_IF_ERROR(fs.SyncDir(root));
    started();
    return FlawedPublish(fs, {});
  };
  const PointReport crash = RunCrashPoints(c);
  EXPECT_EQ(crash.start_steps, 2);
  EXPECT_EQ(crash.steps, 5);
  EXPECT_EQ(crash.triggered, 5);
  EXPECT_TRUE(crash.violations.empty()) << crash.violations.front();
  const PointReport eio = RunFaultPoints(c, ErrnoStatus(EIO, "injected"), Every());
  EXPECT_EQ(eio.points, 5);
  EXPECT_EQ(eio.triggered, 5);
  // Every fsync failing hits the publication's, not the start's.
  const PointReport syncs = RunFailedSyncs(c, ErrnoStatus(EIO, "injected"));
  EXPECT_EQ(syncs.triggered, 1);
  EXPECT_TRUE(syncs.violations.empty()) << syncs.violations.front();
  const CleanRun clean = RunClean(c);
  EXPECT_TRUE(clean.calls_started);
  EXPECT_EQ(clean.bytes_written, kFresh.size());
}

TEST(CrashPointsTest, EnospcSweepCoversEveryByteWritten) {
  CrashCase c = PublishOnceCase("", kFresh);
  const PointReport r = RunByteBudgets(c, Every());
  EXPECT_EQ(r.points, static_cast<int64_t>(kFresh.size()));
  EXPECT_EQ(r.triggered, r.points);
  EXPECT_TRUE(r.violations.empty());
}

TEST(CrashPointsTest, ASampledSweepRunsTheFirstEveryNthAndTheLastFaultPointButEveryCrash) {
  CrashCase c = PublishOnceCase("", kFresh);
  const PointOptions half = {.fault_sample = 2};
  // Steps 1, 3 and 5 of create, append, sync, rename, syncdir.
  const PointReport eio = RunFaultPoints(c, ErrnoStatus(EIO, "injected"), half);
  EXPECT_EQ(eio.points, 3);
  EXPECT_EQ(eio.triggered, 3);
  EXPECT_EQ(eio.sample, 2);
  EXPECT_TRUE(absl::StrContains(eio.Summary(), "points=3 (1 in 2)")) << eio.Summary();
  EXPECT_EQ(RunFaultPoints(c, ErrnoStatus(EIO, "injected"), {.fault_sample = 4}).points, 2);
  // Every other byte of the record's.
  const PointReport full = RunByteBudgets(c, half);
  EXPECT_EQ(full.points, static_cast<int64_t>((kFresh.size() + 1) / 2));
  EXPECT_EQ(full.triggered, full.points);
  // Crash points are never sampled.
  EXPECT_EQ(RunCrashPoints(c, half).points, 6);
}

TEST(CrashPointsTest, TheSampleComesFromTheEnvironmentAndIsOneUnlessAWholeNumberAboveZero) {
  const char* saved = std::getenv("SN_FAULT_POINT_SAMPLE");
  const std::string restore = saved == nullptr ? "" : saved;
  for (const auto& [value, expected] : std::vector<std::pair<const char*, int64_t>>{
           {"4", 4}, {"1", 1}, {"0", 1}, {"-3", 1}, {"x", 1}, {"", 1}}) {
    setenv("SN_FAULT_POINT_SAMPLE", value, 1);
    EXPECT_EQ(FaultSampleFromEnvironment(), expected) << value;
    EXPECT_EQ(PointOptions{}.fault_sample, expected) << value;
  }
  unsetenv("SN_FAULT_POINT_SAMPLE");
  EXPECT_EQ(FaultSampleFromEnvironment(), 1);
  if (saved != nullptr) setenv("SN_FAULT_POINT_SAMPLE", restore.c_str(), 1);
}

}  // namespace
}  // namespace sn::privhelper::store

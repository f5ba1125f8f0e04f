// Crash points of the agent's durable files on FaultFs (tests/fakes): every durable step of
// each write is interrupted (a kill -9 and every modelled power loss), fails with EIO or
// ENOSPC, runs with every fsync failing, and runs out of space. After each, a restart reads
// the files the way the next start does and must find either the old or the new record (never
// a torn or malformed one, never nothing where a record was), the new one whenever the write
// returned OK, and, after a second power loss, what it adopted the first time. The numbers are
// printed as "CRASH-POINTS ..." lines (docs/tests.md).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/generations/pins.h"
#include "agent/generations/progress_file.h"
#include "agent/generations/retention_file.h"
#include "agent/requests/operation_record.h"
#include "agent/state/state_files.h"
#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/fs/durable.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/fakes/crash_points.h"

namespace sn::agent {
namespace {

using fs::CrashCase;
using fs::Dir;
using fs::ExpectNoViolations;
using fs::FaultFs;
using fs::PointOptions;
using fs::RunByteBudgets;
using fs::RunClean;
using fs::RunCrashPoints;
using fs::RunEnd;
using fs::RunFailedSyncs;
using fs::RunFaultPoints;

constexpr char kState[] = "/state";
const std::string kD1(64, '1');
const std::string kD2(64, 'a');

absl::Status Broken(const std::string& what) {
  return absl::InternalError(absl::StrCat("invariant broken: ", what));
}

// The names in `dir` that are not temporaries (a start ignores ".<name>.tmp.<random>").
absl::StatusOr<std::vector<std::string>> Records(FaultFs& fs, const std::string& dir) {
  ASSIGN_OR_RETURN(Dir d, fs.OpenPath(dir));
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(d));
  std::vector<std::string> out;
  for (std::string& n : names) {
    if (!absl::StartsWith(n, ".")) out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every kind of injection at each step of `c` (the byte budget at most at 64 points).
void SweepAll(const CrashCase& c) {
  const PointOptions options = {.max_budget_points = 64};
  ASSERT_TRUE(RunClean(c).result.ok()) << RunClean(c).result.status();
  ExpectNoViolations(RunCrashPoints(c, options), "crash");
  ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(EIO, "injected"), options), "eio");
  ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(ENOSPC, "injected"), options), "enospc");
  ExpectNoViolations(RunFailedSyncs(c, ErrnoStatus(EIO, "injected fsync"), options), "fsync");
  ExpectNoViolations(RunByteBudgets(c, options), "full");
}

// One record replaced at `path`: `old` (empty: none yet) by what `write` publishes. `read`
// is the next start's reader; it returns the record's value as text ("" for none).
CrashCase ReplaceCase(const std::string& name, const std::string& path, const std::string& old,
                      const std::string& fresh_value,
                      std::function<absl::Status(FaultFs&)> write,
                      std::function<absl::StatusOr<std::string>(FaultFs&)> read,
                      const std::string& old_value) {
  CrashCase c;
  c.name = name;
  c.setup = [path, old](FaultFs& fs) {
    (void)fs.MakeDirs(path.substr(0, path.rfind('/')));
    if (!old.empty()) (void)fs.WriteFile(path, old);
  };
  c.operation = [write](FaultFs& fs, const std::function<void()>&)
      -> absl::StatusOr<std::string> {
    RETURN_IF_ERROR(write(fs));
    return std::string();
  };
  c.restart = [path, old_value, fresh_value, read](FaultFs& fs, const RunEnd& end)
      -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> seen = read(fs);
    if (!seen.ok()) {
      return Broken(absl::StrCat("the next start cannot read ", path, ": ",
                                 seen.status().ToString()));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> names,
                     Records(fs, path.substr(0, path.rfind('/'))));
    const std::string file = path.substr(path.rfind('/') + 1);
    if (names.size() > 1 || (names.size() == 1 && names[0] != file)) {
      return Broken(absl::StrCat("the directory holds ", absl::StrJoin(names, ", ")));
    }
    if (*seen == fresh_value) return std::string("new");
    if (end.result.ok()) return Broken("the write returned OK but the new record is not read");
    if (*seen == old_value) return std::string(old_value.empty() ? "none" : "old");
    return Broken(absl::StrCat("the start read \"", *seen, "\", neither the old \"", old_value,
                               "\" nor the new \"", fresh_value, "\""));
  };
  return c;
}

std::string PinsText(const DeploymentPins& p) {
  return absl::StrCat(p.target ? p.target->generation : 0, "/",
                      p.serving ? p.serving->generation : 0);
}

CrashCase PinsCase(bool with_old) {
  const std::string path = absl::StrCat(kState, "/node/deployment.json");
  const DeploymentPins old{GenerationRef{7, kD1}, GenerationRef{7, kD1}};
  const DeploymentPins fresh{GenerationRef{8, kD2}, GenerationRef{7, kD1}};
  return ReplaceCase(
      with_old ? "deployment pins (replacing)" : "deployment pins (first)", path,
      with_old ? FormatPins(old) : "", PinsText(fresh),
      [path, fresh](FaultFs& fs) { return FilePinStore(path, &fs).Store(fresh); },
      [path](FaultFs& fs) -> absl::StatusOr<std::string> {
        ASSIGN_OR_RETURN(DeploymentPins p, FilePinStore(path, &fs).Load());
        return PinsText(p);
      },
      with_old ? PinsText(old) : PinsText(DeploymentPins{}));
}

// Thousands of restarts each log what Recover completed: keep the test log readable.
class StateCrashTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { InitLogging("agent", LogLevel::kError); }
};

TEST_F(StateCrashTest, DeploymentPinsAreTheOldOrTheNewNeverTornOrLost) {
  SweepAll(PinsCase(/*with_old=*/true));
  SweepAll(PinsCase(/*with_old=*/false));
}

TEST_F(StateCrashTest, TheOwnerEpochIsTheOldOrTheNewNeverTornOrLost) {
  const std::string path = absl::StrCat(kState, "/node/owner_epoch");
  SweepAll(ReplaceCase(
      "owner epoch", path, "41\n", "42",
      [path](FaultFs& fs) { return FileEpochStore(path, &fs).Store(42); },
      [path](FaultFs& fs) -> absl::StatusOr<std::string> {
        ASSIGN_OR_RETURN(int64_t epoch, FileEpochStore(path, &fs).Load());
        return absl::StrCat(epoch);
      },
      "41"));
}

std::vector<RetentionStatus> Retention(int64_t generation) {
  RetentionStatus s;
  s.ref = GenerationRef{generation, kD2};
  s.collection = "held locally";
  s.reason = "the serving pin";
  return {s};
}

TEST_F(StateCrashTest, TheRetentionFileIsTheOldOrTheNewNeverTorn) {
  const std::string path = absl::StrCat(kState, "/node/retention.json");
  const absl::Time t = absl::FromUnixSeconds(1795000000);
  auto value = [](const std::vector<RetentionStatus>& r) {
    return r.empty() ? std::string("empty") : absl::StrCat(r[0].ref.generation);
  };
  SweepAll(ReplaceCase(
      "retention file", path, FormatRetentionRecord(Retention(5), t), "6",
      [path, t](FaultFs& fs) { return WriteRetentionRecord(path, Retention(6), t, &fs); },
      [path, value](FaultFs& fs) -> absl::StatusOr<std::string> {
        ASSIGN_OR_RETURN(std::string text, fs::ReadDurableFilePath(fs, path, 1 << 20));
        ASSIGN_OR_RETURN(std::vector<RetentionStatus> r, ParseRetentionRecord(text));
        return value(r);
      },
      "5"));
}

TEST_F(StateCrashTest, TheProgressFileIsTheOldOrTheNewNeverTorn) {
  const std::string path = absl::StrCat(kState, "/generations/5.progress.json");
  const PreparationJob job{GenerationRef{5, kD2}, JobRole::kTarget};
  const absl::Time t = absl::FromUnixSeconds(1795000000);
  const PreparationProgress before{"upload", "image.tar", 100, 1000};
  const PreparationProgress after{"upload", "image.tar", 900, 1000};
  SweepAll(ReplaceCase(
      "progress file", path, FormatProgressRecord(job, before, std::nullopt, t), "900",
      [path, job, after, t](FaultFs& fs) {
        return WriteProgressRecord(path, job, after, std::nullopt, t, &fs);
      },
      [path](FaultFs& fs) -> absl::StatusOr<std::string> {
        ASSIGN_OR_RETURN(std::string text, fs::ReadDurableFilePath(fs, path, 1 << 20));
        ASSIGN_OR_RETURN(ProgressRecord r, ParseProgressRecord(text));
        return absl::StrCat(r.progress.bytes_done);
      },
      "100"));
}

NodeIdentity Identity() {
  return NodeIdentity{"5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e",
                      "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
                      "docker",
                      7,
                      kD1,
                      "host-1.2.3",
                      "https://core.example"};
}

// The end of `agent enroll` (enroll.cc FinishEnrollment): the specification, the identity (its
// presence marks the node enrolled), then the pending enrollment removed. Every restart finds
// the node enrolled, or not enrolled with its enrollment still resumable; never an identity or
// a pending enrollment it cannot read.
TEST_F(StateCrashTest, EnrollmentEndsEnrolledOrResumableNeverHalfRead) {
  CrashCase c;
  c.name = "enrollment finish";
  c.setup = [](FaultFs& fs) {
    (void)fs.MakeDirs("state/node");
    (void)fs.MakeDirs("state/generations");
    StateFiles files(kState, &fs);
    (void)files.WriteCredential("secret");
    (void)files.WritePendingEnrollment(Identity());
  };
  c.operation = [](FaultFs& fs, const std::function<void()>&) -> absl::StatusOr<std::string> {
    StateFiles files(kState, &fs);
    RETURN_IF_ERROR(files.WriteSpecification(7, "{\"specification\":7}"));
    RETURN_IF_ERROR(files.WriteIdentity(Identity()));
    RETURN_IF_ERROR(files.RemovePendingEnrollment());
    return std::string();
  };
  c.restart = [](FaultFs& fs, const RunEnd& end) -> absl::StatusOr<std::string> {
    StateFiles files(kState, &fs);
    absl::StatusOr<std::string> credential = files.ReadCredential();
    if (!credential.ok() || *credential != "secret") {
      return Broken(absl::StrCat("the credential: ", credential.status().ToString()));
    }
    absl::StatusOr<NodeIdentity> enrolled = files.ReadIdentity();
    absl::StatusOr<NodeIdentity> pending = files.ReadPendingEnrollment();
    if (!enrolled.ok() && !absl::IsNotFound(enrolled.status())) {
      return Broken(absl::StrCat("the identity: ", enrolled.status().ToString()));
    }
    if (!pending.ok() && !absl::IsNotFound(pending.status())) {
      return Broken(absl::StrCat("the pending enrollment: ", pending.status().ToString()));
    }
    if ((enrolled.ok() && !(*enrolled == Identity())) ||
        (pending.ok() && !(*pending == Identity()))) {
      return Broken("an identity other than the one written");
    }
    if (end.result.ok() && (!enrolled.ok() || pending.ok())) {
      return Broken("enroll returned OK but the node is not enrolled with nothing pending");
    }
    if (enrolled.ok()) {
      // Enrolled: its specification was durable before the identity.
      absl::StatusOr<std::string> spec =
          fs::ReadDurableFilePath(fs, files.SpecificationPath(7), 4096);
      if (!spec.ok() || *spec != "{\"specification\":7}") {
        return Broken(absl::StrCat("enrolled without its specification: ",
                                   spec.status().ToString()));
      }
      return std::string(pending.ok() ? "enrolled, pending left" : "enrolled");
    }
    if (!pending.ok()) return Broken("neither enrolled nor resumable");
    return std::string("resumable");
  };
  SweepAll(c);
}

constexpr char kId[] = "11111111-1111-4111-8111-111111111111";
constexpr char kBox[] = "22222222-2222-4222-8222-222222222222";
constexpr char kOther[] = "33333333-3333-4333-8333-333333333333";

// The next start's Recover: it must never refuse.
absl::Status RecoverAtRestart(OperationRecord& record) {
  absl::Status recovered = record.Recover();
  return recovered.ok() ? recovered : Broken(absl::StrCat("Recover: ", recovered.ToString()));
}

wire::RecordedResponse Created() {
  wire::RecordedResponse r;
  r.id = kId;
  r.result = wire::MutationResult(wire::CreateResult{kBox, "native-1"});
  return r;
}

// A mutation's life in the operation record: accepted, marked running, completed. Every
// restart (Recover) finds no record (accepted was never durable), or the record completed: as
// it completed, or `unavailable` (it was queued) or `uncertain` (it was running); OK from
// Complete means completed as it completed. Every sealed journal segment reads.
TEST_F(StateCrashTest, AnOperationRecordIsNeverLostOrHalfReadAcrossItsLife) {
  CrashCase c;
  c.name = "operation record";
  c.setup = [](FaultFs& fs) { (void)fs.MakeDirs("state"); };
  c.operation = [](FaultFs& fs, const std::function<void()>& started)
      -> absl::StatusOr<std::string> {
    SimulatedClock clock;
    OperationRecord record(absl::StrCat(kState, "/operations"), &clock, kMaxOperationRecords,
                           &fs);
    RETURN_IF_ERROR(record.Recover());
    started();
    RETURN_IF_ERROR(record.Accept(kId, "create", kBox, 7));
    RETURN_IF_ERROR(record.MarkRunning(kId));
    RETURN_IF_ERROR(record.Complete(kId, Created()));
    return std::string();
  };
  c.restart = [](FaultFs& fs, const RunEnd& end) -> absl::StatusOr<std::string> {
    SimulatedClock clock;
    OperationRecord record(absl::StrCat(kState, "/operations"), &clock, kMaxOperationRecords,
                           &fs);
    RETURN_IF_ERROR(RecoverAtRestart(record));
    // Everything on disk reads (no sealed segment damaged), and holds at most this one id.
    absl::StatusOr<std::vector<RecordEntry>> on_disk =
        ReadOperationRecord(fs, absl::StrCat(kState, "/operations"), nullptr);
    if (!on_disk.ok()) return Broken(absl::StrCat("the journal: ", on_disk.status().ToString()));
    if (on_disk->size() > 1) return Broken("more than one id in the journal");
    const RecordEntry* e = record.Find(kId);
    if (e == nullptr) {
      if (!on_disk->empty()) return Broken("a journal line Recover did not index");
      if (end.result.ok()) return Broken("Complete returned OK but the record is gone");
      return std::string("absent");
    }
    if (e->state != RecordState::kCompleted || !e->response.has_value()) {
      return Broken("Recover left an interrupted mutation uncompleted");
    }
    if (e->operation != "create" || e->sandbox_id != kBox || e->generation != 7) {
      return Broken("the record names another mutation");
    }
    if (*e->response == Created()) return std::string("completed as it completed");
    if (end.result.ok()) return Broken("Complete returned OK but another outcome is recorded");
    if (e->response->error_code == "unavailable") return std::string("unavailable");
    if (e->response->error_code == "uncertain") return std::string("uncertain");
    return Broken("an outcome the record was never given");
  };
  const fs::PointReport crash = RunCrashPoints(c, {.max_budget_points = 64});
  ExpectNoViolations(crash, "crash");
  // The sweep reached every outcome it claims to check.
  for (const char* outcome : {"absent", "unavailable", "uncertain", "completed as it completed"}) {
    EXPECT_GT(crash.adopted.count(outcome), 0u) << outcome;
  }
  SweepAll(c);
}

// The journal across segments: every write opens a new segment (segment_bytes 1), so each
// transition seals the segment before it, and a prune 49 h later drops the oldest segments.
// At every crash point the next start reads every sealed segment to its sealed length (never
// DataLoss), finds each id with an outcome it was given (or, interrupted, unavailable /
// uncertain), finds the last mutation as it completed when the run returned OK, and never
// finds an id whose Accept was not reached.
TEST_F(StateCrashTest, TheJournalSealsEverySegmentAcrossRotationsAndDrops) {
  const std::string ids[] = {kId, kOther, "44444444-4444-4444-8444-444444444444"};
  CrashCase c;
  c.name = "operation journal segments";
  c.setup = [](FaultFs& fs) { (void)fs.MakeDirs("state"); };
  c.operation = [ids](FaultFs& fs, const std::function<void()>& started)
      -> absl::StatusOr<std::string> {
    SimulatedClock clock;
    OperationRecord record(absl::StrCat(kState, "/operations"), &clock, kMaxOperationRecords,
                           &fs, /*segment_bytes=*/1);
    RETURN_IF_ERROR(record.Recover());
    started();
    for (int i = 0; i < 3; ++i) {
      if (i == 2) {
        clock.Advance(absl::Hours(49));
        if (record.Prune(kRecordRetention) != 2) return Broken("the prune removed another count");
        RETURN_IF_ERROR(record.TakeDeferredError());
      }
      RETURN_IF_ERROR(record.Accept(ids[i], "kill", kBox, 7));
      RETURN_IF_ERROR(record.MarkRunning(ids[i]));
      wire::RecordedResponse done;
      done.id = ids[i];
      RETURN_IF_ERROR(record.Complete(ids[i], done));
    }
    return std::string();
  };
  c.restart = [ids](FaultFs& fs, const RunEnd& end) -> absl::StatusOr<std::string> {
    SimulatedClock clock;
    OperationRecord record(absl::StrCat(kState, "/operations"), &clock, kMaxOperationRecords,
                           &fs, /*segment_bytes=*/1);
    RETURN_IF_ERROR(RecoverAtRestart(record));
    std::string seen;
    for (const std::string& id : ids) {
      const RecordEntry* e = record.Find(id);
      if (e == nullptr) {
        seen += "-";
        continue;
      }
      if (e->state != RecordState::kCompleted || !e->response.has_value()) {
        return Broken("Recover left an interrupted mutation uncompleted");
      }
      if (!e->response->error_code.has_value()) {
        seen += "k";
      } else if (*e->response->error_code == "unavailable") {
        seen += "a";
      } else if (*e->response->error_code == "uncertain") {
        seen += "u";
      } else {
        return Broken("an outcome the record was never given");
      }
    }
    // The last id is only ever accepted after the first two completed.
    if (seen[2] != '-' && (seen[0] == 'a' || seen[0] == 'u' || seen[1] == 'a' || seen[1] == 'u')) {
      return Broken(absl::StrCat("a later mutation before an earlier one completed: ", seen));
    }
    // (The prune removed the first two from memory; the segment of the second one's last line
    // was the newest then, which is never removed, so a start with an earlier clock may find
    // it again.)
    if (end.result.ok() && (seen[0] != '-' || seen[2] != 'k' || seen[1] == 'a' || seen[1] == 'u')) {
      return Broken(absl::StrCat("the run returned OK but the record holds ", seen));
    }
    return seen;
  };
  SweepAll(c);
}

// A record of the earlier one-file-per-record format is read, copied into the journal and only
// then removed: at every crash point the next start finds it, as it was.
TEST_F(StateCrashTest, ARecordOfTheEarlierFormatIsCopiedIntoTheJournalBeforeItsFileGoes) {
  CrashCase c;
  c.name = "operation record migration";
  c.setup = [](FaultFs& fs) {
    (void)fs.MakeDirs("state/operations");
    RecordEntry e;
    e.id = kId;
    e.operation = "create";
    e.sandbox_id = kBox;
    e.generation = 7;
    e.state = RecordState::kCompleted;
    e.accepted_at = SimulatedClock().Now();
    e.completed_at = e.accepted_at;
    e.response = Created();
    (void)fs.WriteFile(absl::StrCat("state/operations/", kId, ".json"), EncodeRecordEntry(e));
  };
  c.operation = [](FaultFs& fs, const std::function<void()>& started)
      -> absl::StatusOr<std::string> {
    SimulatedClock clock;
    OperationRecord record(absl::StrCat(kState, "/operations"), &clock, kMaxOperationRecords,
                           &fs);
    started();
    RETURN_IF_ERROR(record.Recover());
    RETURN_IF_ERROR(record.TakeDeferredError());
    return std::string();
  };
  c.restart = [](FaultFs& fs, const RunEnd& end) -> absl::StatusOr<std::string> {
    SimulatedClock clock;
    OperationRecord record(absl::StrCat(kState, "/operations"), &clock, kMaxOperationRecords,
                           &fs);
    RETURN_IF_ERROR(RecoverAtRestart(record));
    const RecordEntry* e = record.Find(kId);
    if (e == nullptr) return Broken("the earlier format's record was lost");
    if (!e->response.has_value() || *e->response != Created()) {
      return Broken("the earlier format's record changed");
    }
    absl::StatusOr<std::string> file =
        fs.Contents(absl::StrCat(kState, "/operations/", kId, ".json"));
    (void)end;
    if (file.ok()) return Broken("the start that copied the record kept its file");
    return std::string("copied");
  };
  SweepAll(c);
}

// A full state disk (the chaos soak's finding 3): an agent restarted with a mutation left
// running must still start. Recover completes it as uncertain in memory (what observe answers)
// while the file keeps "running", and the first start with room writes that same outcome.
TEST_F(StateCrashTest, AFullStateDiskDoesNotKeepTheAgentFromRecovering) {
  FaultFs fs;
  ASSERT_TRUE(fs.MakeDirs("state").ok());
  const std::string dir = absl::StrCat(kState, "/operations");
  SimulatedClock clock;
  {
    OperationRecord record(dir, &clock, kMaxOperationRecords, &fs);
    ASSERT_TRUE(record.Recover().ok());
    ASSERT_TRUE(record.Accept(kId, "create", kBox, 7).ok());
    ASSERT_TRUE(record.MarkRunning(kId).ok());
  }  // killed while the create ran
  auto on_disk = [&]() -> RecordState {
    absl::StatusOr<std::vector<RecordEntry>> all = ReadOperationRecord(fs, dir, nullptr);
    EXPECT_TRUE(all.ok()) << all.status();
    EXPECT_EQ(all.ok() ? all->size() : 0u, 1u);
    return all.ok() && all->size() == 1 ? (*all)[0].state : RecordState::kQueued;
  };
  ASSERT_EQ(on_disk(), RecordState::kRunning);

  fs.SetByteBudget(0);  // the disk is full
  {
    OperationRecord record(dir, &clock, kMaxOperationRecords, &fs);
    ASSERT_TRUE(record.Recover().ok()) << "a full state disk stopped the agent's start";
    const RecordEntry* e = record.Find(kId);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->state, RecordState::kCompleted);
    ASSERT_TRUE(e->response.has_value());
    EXPECT_EQ(e->response->error_code, "uncertain");
    // Nothing new is accepted while nothing can be written.
    EXPECT_FALSE(record.Accept(kOther, "kill", kBox, 7).ok());
  }
  EXPECT_EQ(on_disk(), RecordState::kRunning);  // not half-written, not lost

  fs.SetByteBudget(std::nullopt);  // room again
  OperationRecord record(dir, &clock, kMaxOperationRecords, &fs);
  ASSERT_TRUE(record.Recover().ok());
  const RecordEntry* e = record.Find(kId);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->response.has_value());
  EXPECT_EQ(e->response->error_code, "uncertain");
  EXPECT_EQ(on_disk(), RecordState::kCompleted);
}

}  // namespace
}  // namespace sn::agent

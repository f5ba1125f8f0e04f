#include "tests/privhelper/store/collect_crash_cases.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "privhelper/store/collection_records.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/prep_failure.h"
#include "tests/privhelper/store/collect_crash_internal.h"

namespace sn::privhelper::store {

using fs::CrashCase;
using fs::FaultFs;
using fs::RunEnd;
namespace {

constexpr char kRetryOk[] = "[a retry in this process returned OK]";

absl::Status Broken(const std::string& what) {
  return absl::InternalError(absl::StrCat("invariant broken: ", what));
}

bool IsBroken(const absl::Status& s) { return absl::StartsWith(s.message(), "invariant broken"); }

std::string Join(const std::set<std::string>& names) { return absl::StrJoin(names, ", "); }

// Generation 3's records a drop reclaims once its marker is durable (its journal is checked on
// its own): specification, plan, images record.
bool Reclaimed(const std::string& path) {
  for (const std::string& name : RecordsReclaimedWhenDropped(kCollectedGeneration)) {
    if (name != CollectionJournalName(kCollectedGeneration) && path == GenerationPath(name)) {
      return true;
    }
  }
  return false;
}

// Without a durable marker every reclaimable record of generation 3 is byte for byte what the
// setup left; beside one (after a start, or a collection that returned OK) none is left.
absl::Status CheckReclaimed(FaultFs& fs, const Baseline& b, bool dropped) {
  for (const std::string& name : RecordsReclaimedWhenDropped(kCollectedGeneration)) {
    const std::string path = GenerationPath(name);
    if (!Reclaimed(path)) continue;
    absl::StatusOr<std::string> now = fs.Contents(path);
    if (dropped) {
      if (now.ok()) return Broken(absl::StrCat(path, " left beside a durable dropped marker"));
      continue;
    }
    auto before = b.files.find(path);
    if (before == b.files.end()) {
      if (now.ok()) return Broken(absl::StrCat(path, " appeared"));
    } else if (!now.ok()) {
      return Broken(absl::StrCat(path, " removed while generation 3 is not durably dropped"));
    } else if (*now != before->second) {
      return Broken(absl::StrCat(path, " changed"));
    }
  }
  return absl::OkStatus();
}

bool Refusing(CollectStage stage) { return stage == CollectStage::kImportStartedMissing; }

std::optional<GenerationStatus> StatusOf(Privhelper& p, int64_t g) {
  for (const GenerationStatus& s : p.generations->Statuses()) {
    if (s.generation == g) return s;
  }
  return std::nullopt;
}

absl::Status OnlyNames(FaultFs& fs, const std::string& dir, const std::set<std::string>& allowed) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs.Names(dir));
  for (const std::string& n : names) {
    if (!allowed.contains(n)) return Broken(absl::StrCat(dir, "/", n, " after a start"));
  }
  return absl::OkStatus();
}

// The release files now, by name.
std::set<std::string> ReleaseNames(FaultFs& fs) {
  std::set<std::string> out;
  absl::StatusOr<std::vector<std::string>> names = fs.Names(ReleaseDir());
  if (names.ok()) out.insert(names->begin(), names->end());
  return out;
}

// In the process whose collection failed: a journal on disk makes generation 3 unusable.
absl::Status CheckInProcess(FaultFs& fs, Privhelper& p) {
  if (!fs.Contents(GenerationPath(CollectionJournalName(kCollectedGeneration))).ok()) {
    return absl::OkStatus();
  }
  std::optional<GenerationStatus> s = StatusOf(p, kCollectedGeneration);
  if (p.generations->Find(kCollectedGeneration) != nullptr || !s.has_value() ||
      s->state == GenerationState::kReady || s->state == GenerationState::kPreparing) {
    return Broken(
        "a failed collection left its journal on disk, yet the generation stays usable "
        "in that process");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Operation(FaultFs& fs, const std::function<void()>& started,
                                      const CollectWorld& w, CollectStage stage,
                                      int64_t fail_step) {
  const bool sweep_start = stage == CollectStage::kStartClearsJournal;
  if (sweep_start) started();
  ASSIGN_OR_RETURN(std::unique_ptr<Privhelper> p, StartPrivhelper(fs, w.prep));
  if (!sweep_start) started();
  if (std::optional<GenerationStatus> s = StatusOf(*p, kCollectedGeneration);
      s.has_value() && s->state == GenerationState::kFailed) {
    // A start reports what failed in it through the generations' states (Probe).
    return absl::FailedPreconditionError("the start reports generation 3 FAILED");
  }
  if (fail_step > 0) fs.FailStep(fs.steps() + fail_step, ErrnoStatus(EIO, "injected first"));
  int calls = 0;
  absl::Status s = CollectThree(*p, w, CountingHooks(&calls, nullptr));
  if (s.ok()) return std::string("dropped");
  if (fs.crashed()) return s;
  RETURN_IF_ERROR(CheckInProcess(fs, *p));
  // The agent's next grant, in the same process.
  absl::Status again = CollectThree(*p, w, CountingHooks(&calls, nullptr));
  if (!again.ok() && !fs.crashed()) RETURN_IF_ERROR(CheckInProcess(fs, *p));
  return absl::Status(s.code(),
                      absl::StrCat(s.message(), " ", again.ok() ? kRetryOk : again.ToString()));
}

// Generation 3 COLLECTING or DROPPED: never usable, never prepared again, nothing changed.
absl::Status CheckUnusable(FaultFs& fs, Privhelper& p, const CollectWorld& w) {
  const int64_t g = kCollectedGeneration;
  if (p.generations->Find(g) != nullptr) return Broken("a collected generation is held");
  if (p.generations->LockShared(g).ok()) return Broken("a collected generation locks shared");
  if (p.generations->HelperPath(g).ok()) return Broken("a collected generation runs a helper");
  const std::string records = RecordDigests(fs);
  absl::StatusOr<std::vector<std::string>> begun =
      p.generations->Begin(g, w.collected.specification, w.collected.digest);
  if (!absl::IsFailedPrecondition(begun.status())) {
    return Broken(
        absl::StrCat("BeginPreparation of a collected generation: ", begun.status().ToString()));
  }
  if (p.generations->Finish(g, *w.prep.NewImporter()).ok()) {
    return Broken("FinishPreparation of a collected generation");
  }
  if (RecordDigests(fs) != records) return Broken("a refused preparation changed records");
  return absl::OkStatus();
}

// The records of both generations as the setup left them; generation 2 READY and usable.
absl::Status CheckRecordsAndKept(FaultFs& fs, Privhelper& p, const CollectWorld& w,
                                 const Baseline& b) {
  for (const auto& [path, bytes] : b.files) {
    if (path == GenerationPath(CollectionJournalName(kCollectedGeneration))) continue;
    if (Reclaimed(path)) continue;  // checked against the marker (CheckReclaimed)
    absl::StatusOr<std::string> now = fs.Contents(path);
    const bool release_file = absl::StartsWith(path, ReleaseDir() + "/");
    if (!now.ok() && release_file && !b.survivors.contains(path.substr(ReleaseDir().size() + 1))) {
      continue;  // generation 3's own file: checked against its journal and marker
    }
    if (!now.ok()) return Broken(absl::StrCat(path, " is gone"));
    if (*now != bytes) return Broken(absl::StrCat(path, " changed"));
  }
  for (const auto& [g, before] : b.leases) {
    absl::StatusOr<FileInfo> now = StatPath(fs, GenerationPath(LeaseName(g)));
    if (!now.ok() || now->ino != before.ino || now->dev != before.dev ||
        now->birth_ns != before.birth_ns) {
      return Broken(absl::StrCat("the lease of ", g, " was removed or replaced"));
    }
  }
  std::optional<GenerationStatus> kept = StatusOf(p, kKeptGeneration);
  if (!kept.has_value() || kept->state != GenerationState::kReady ||
      p.generations->Find(kKeptGeneration) == nullptr) {
    return Broken("the retained generation 2 is no longer READY");
  }
  if (!p.generations->LockShared(kKeptGeneration).ok()) return Broken("2's lease refuses");
  for (const PlannedArtifact& a : w.kept.plan.artifacts) {
    absl::Status s = p.releases->Check(kCaseSource, {a.name, a.kind, a.sha256, a.size});
    if (!s.ok()) return Broken(absl::StrCat("2's ", a.name, ": ", s.ToString()));
  }
  return absl::OkStatus();
}

// Generation 3's journal, marker, files and state agree. Returns whether native_done was
// durable (or the generation already dropped): a retry must not run the native cleanup then.
absl::StatusOr<bool> CheckCollected(FaultFs& fs, Privhelper& p, const CollectWorld& w,
                                    const Baseline& b, const RunEnd& end, CollectStage stage) {
  const int64_t g = kCollectedGeneration;
  std::set<std::string> gone;
  for (const std::string& name : b.own_stored) {
    if (!fs.Contents(ReleasePath(name)).ok()) gone.insert(name);
  }
  absl::StatusOr<std::string> journal = fs.Contents(GenerationPath(CollectionJournalName(g)));
  absl::StatusOr<std::string> marker = fs.Contents(GenerationPath(DroppedMarkerName(g)));
  std::optional<GenerationStatus> s = StatusOf(p, g);
  if (!s.has_value()) return Broken("generation 3 is not reported");
  const bool promised =
      (end.result.ok() || absl::StrContains(end.result.status().message(), kRetryOk)) ||
      (end.second_restart && !Refusing(stage));
  if (promised && !marker.ok()) {
    return Broken("a collection that returned OK left no dropped marker");
  }
  if (marker.ok()) {
    if (*marker != EncodeDroppedMarker({kCaseInstallation, g, w.collected.digest})) {
      return Broken(absl::StrCat("the dropped marker holds ", *marker));
    }
    if (journal.ok()) return Broken("a journal beside a durable marker after a start");
    if (s->state != GenerationState::kDropped) return Broken("a marker, yet not DROPPED");
    if (gone != b.own_stored) {
      return Broken(absl::StrCat("a marker with files left; gone: ", Join(gone)));
    }
    RETURN_IF_ERROR(CheckReclaimed(fs, b, /*dropped=*/true));
    RETURN_IF_ERROR(CheckUnusable(fs, p, w));
    return true;
  }
  RETURN_IF_ERROR(CheckReclaimed(fs, b, /*dropped=*/false));
  if (journal.ok()) {
    absl::StatusOr<CollectionJournal> j = DecodeCollectionJournal(*journal);
    if (!j.ok() || j->installation_id != kCaseInstallation || j->generation != g ||
        j->specification_digest != w.collected.digest || j->source != kCaseSource) {
      return Broken(absl::StrCat("the journal is torn or binds another generation: ", *journal));
    }
    std::set<std::string> listed;
    for (const PlannedArtifact& f : j->files) {
      const PlannedArtifact* planned = nullptr;
      for (const PlannedArtifact& a : w.collected.plan.artifacts) {
        if (a.name == f.name) planned = &a;
      }
      if (planned == nullptr || !(*planned == f)) {
        return Broken(absl::StrCat("the journal lists ", f.name, " not as recorded"));
      }
      listed.insert(f.name);
    }
    const bool resumed_after_removal = stage == CollectStage::kResumedNativeDone;
    std::set<std::string> expected = b.own_stored;
    if (resumed_after_removal) expected.insert("helper");
    if (listed != expected) {
      return Broken(absl::StrCat("the journal lists ", Join(listed), ", not ", Join(expected)));
    }
    if (s->state != GenerationState::kCollecting) return Broken("a journal, yet not COLLECTING");
    if (!j->native_done && !gone.empty()) {
      return Broken(absl::StrCat(Join(gone), " removed before native_done was durable"));
    }
    RETURN_IF_ERROR(CheckUnusable(fs, p, w));
    return j->native_done;
  }
  if (b.journal) return Broken("the journal durable before the operation vanished");
  if (!gone.empty()) {
    return Broken(absl::StrCat(Join(gone), " removed without a durable journal"));
  }
  const GenerationState want =
      stage == CollectStage::kReady ? GenerationState::kReady : GenerationState::kPreparing;
  if (s->state != want) return Broken("without a journal the generation is not as it was");
  return false;
}

absl::StatusOr<std::string> Restart(FaultFs& fs, const RunEnd& end, const CollectWorld& w,
                                    const Baseline& b, CollectStage stage) {
  if (!end.result.ok() && IsBroken(end.result.status())) return end.result.status();
  absl::StatusOr<std::unique_ptr<Privhelper>> started = StartPrivhelper(fs, w.prep);
  if (!started.ok()) {
    return Broken(absl::StrCat("the next start refuses: ", started.status().ToString()));
  }
  Privhelper& p = **started;
  RETURN_IF_ERROR(OnlyNames(fs, "", {kInstallationFile, "node", "releases"}));
  RETURN_IF_ERROR(OnlyNames(fs, "node", {"generations", kInstallationLockFile}));
  std::set<std::string> records = {CollectionJournalName(kCollectedGeneration),
                                   DroppedMarkerName(kCollectedGeneration)};
  for (const auto& [path, bytes] : b.files) {
    if (absl::StartsWith(path, std::string(kGenerationsDir) + "/")) {
      records.insert(path.substr(sizeof(kGenerationsDir)));
    }
  }
  RETURN_IF_ERROR(OnlyNames(fs, kGenerationsDir, records));
  RETURN_IF_ERROR(OnlyNames(fs, "releases", {kCaseSource}));
  std::set<std::string> release_names;
  for (const auto& [path, bytes] : b.files) {
    if (absl::StartsWith(path, ReleaseDir() + "/")) {
      release_names.insert(path.substr(ReleaseDir().size() + 1));
    }
  }
  RETURN_IF_ERROR(OnlyNames(fs, ReleaseDir(), release_names));
  RETURN_IF_ERROR(CheckRecordsAndKept(fs, p, w, b));
  ASSIGN_OR_RETURN(bool native_done, CheckCollected(fs, p, w, b, end, stage));
  // CollectGeneration again, as a fresh grant asks.
  const std::string before = RecordDigests(fs);
  int calls = 0;
  std::vector<std::string> images;
  absl::Status again = CollectThree(p, w, CountingHooks(&calls, &images));
  if (Refusing(stage)) {
    if (!absl::IsFailedPrecondition(again) ||
        PrepDiagnosticOf(again) != Diagnostic::kOwnershipRefused) {
      return Broken(absl::StrCat("the collection retried: ", again.ToString()));
    }
    if (RecordDigests(fs) != before) return Broken("the refused collection changed records");
    return std::string("REFUSED ownership_refused");
  }
  if (!again.ok()) return Broken(absl::StrCat("the collection retried: ", again.ToString()));
  if (calls != (native_done ? 0 : 1)) {
    return Broken(absl::StrCat("the retry ran the native cleanup ", calls, " times, native_done ",
                               native_done ? "durable" : "not durable"));
  }
  // The native cleanup is told only the images no other generation holds: generation 2, kept
  // beside 3 and ready, holds the same image, so nothing (a cleanup given 3's image would let
  // a private store remove what 2 still runs).
  const bool has_final = b.files.contains(GenerationPath(FinalConfigurationName(3)));
  const bool kept_holds_it = b.files.contains(GenerationPath(FinalConfigurationName(2)));
  if (calls == 1 && images != (has_final && !kept_holds_it
                                   ? std::vector<std::string>{w.prep.image_identity}
                                   : std::vector<std::string>{})) {
    return Broken(absl::StrCat("the native cleanup was given ", absl::StrJoin(images, ",")));
  }
  RETURN_IF_ERROR(CheckRecordsAndKept(fs, p, w, b));
  RunEnd retried;  // its OK promises DROPPED
  retried.result = std::string("retried");
  RETURN_IF_ERROR(CheckCollected(fs, p, w, b, retried, stage).status());
  const std::set<std::string> left = ReleaseNames(fs);
  if (left != b.survivors) {
    return Broken(absl::StrCat("the retried collection left ", Join(left)));
  }
  return absl::StrCat("DROPPED ", Join(left));
}

}  // namespace

std::string ExpectedCollectionOutcome(const CollectWorld& w, CollectStage stage) {
  if (Refusing(stage)) return "REFUSED ownership_refused";
  return absl::StrCat("DROPPED ", Join(TakeBaseline(w, stage).survivors));
}

CrashCase CollectionCase(std::shared_ptr<const CollectWorld> world, CollectStage stage,
                         int64_t fail_step) {
  auto baseline = std::make_shared<const Baseline>(TakeBaseline(*world, stage));
  CrashCase c;
  c.name = CollectStageName(stage);
  if (fail_step > 0) absl::StrAppend(&c.name, ", its step ", fail_step, " failed, retried");
  c.setup = [world, stage](FaultFs& fs) { SetupCollection(fs, *world, stage); };
  c.operation = [world, stage, fail_step](FaultFs& fs, const std::function<void()>& started) {
    return Operation(fs, started, *world, stage, fail_step);
  };
  c.restart = [world, baseline, stage](FaultFs& fs, const RunEnd& end) {
    return Restart(fs, end, *world, *baseline, stage);
  };
  return c;
}

}  // namespace sn::privhelper::store

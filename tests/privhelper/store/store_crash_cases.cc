#include "tests/privhelper/store/store_crash_cases.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper::store {

using fs::CrashCase;
using fs::FaultFs;
using fs::RunEnd;
namespace {

constexpr char kRecordDir[] = "recs";
constexpr char kRecord[] = "r";

// A broken invariant (any error a restart returns is reported as a violation).
absl::Status Broken(const std::string& what) {
  return absl::InternalError(absl::StrCat("invariant broken: ", what));
}

std::string Quote(const std::string& s) {
  return absl::StrCat("\"", s.size() > 80 ? s.substr(0, 80) + "..." : s, "\"");
}

CrashCase PublishCase(const std::string& old, const std::string& fresh, bool once) {
  CrashCase c;
  c.name = absl::StrCat(once ? "PublishOnce" : "PublishReplacing",
                        old.empty() ? " (new record)" : " (over an existing record)");
  c.setup = [old](FaultFs& fs) {
    (void)fs.MakeDirs(kRecordDir);
    if (!old.empty()) (void)fs.WriteFile(absl::StrCat(kRecordDir, "/", kRecord), old);
  };
  c.operation = [fresh, once](FaultFs& fs,
                              const std::function<void()>&) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, fs.Root());
    ASSIGN_OR_RETURN(Dir dir, fs.OpenDirAt(root, kRecordDir));
    RETURN_IF_ERROR(once ? PublishOnce(fs, dir, kRecord, fresh)
                         : PublishReplacing(fs, dir, kRecord, fresh));
    return std::string();
  };
  c.restart = [old, fresh, once](FaultFs& fs, const RunEnd& end) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, fs.Root());
    ASSIGN_OR_RETURN(Dir dir, fs.OpenDirAt(root, kRecordDir));
    RETURN_IF_ERROR(RemoveStrayTemporaries(fs, dir));
    RETURN_IF_ERROR(fs.SyncDir(dir));  // a reader makes what it adopts durable first
    ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(dir));
    if (names.size() > 1 || (names.size() == 1 && names[0] != kRecord)) {
      return Broken(absl::StrCat("the directory holds ", absl::StrJoin(names, ", ")));
    }
    absl::StatusOr<std::string> rec = ReadPrivateRecord(fs, dir, kRecord, 4096, kOwner);
    if (absl::IsNotFound(rec.status())) {
      if (!old.empty()) return Broken("the existing record vanished");
      if (end.result.ok()) return Broken("the publication returned OK but the record is absent");
      return std::string();
    }
    if (!rec.ok()) return Broken(absl::StrCat("the record is unreadable: ", rec.status().ToString()));
    const bool may_be_fresh = !(once && !old.empty());
    if (*rec == fresh && may_be_fresh) return *rec;
    if (*rec == old && !old.empty()) {
      if (end.result.ok()) return Broken("the publication returned OK but the old record is back");
      return *rec;
    }
    return Broken(absl::StrCat("the record holds ", Quote(*rec), ", neither the old ",
                               Quote(old), " nor the published ", Quote(fresh)));
  };
  return c;
}

// The image store of kPutImageOverlapped: a daemon that is down. Its Load fails without
// reading, so the overlapped load's thread makes no filesystem call and the sweep stays
// deterministic; what the stage adds is its durable step (the plan with import_started).
// Stateless, so one instance outlives every load thread.
class DaemonDownImporter final : public ImageImporter {
 public:
  absl::Status Load(const Source&, uint64_t) override {
    return absl::UnavailableError("the daemon is down");
  }
  absl::StatusOr<std::string> ArchiveIdentity(const Source&, const Skip&, uint64_t) override {
    return absl::UnavailableError("the daemon is down");
  }
  absl::StatusOr<std::string> Resolve(const std::string&) override {
    return absl::NotFoundError("the daemon is down");
  }
  absl::Status ForgetImages(const std::vector<std::string>&) override {
    return absl::OkStatus();
  }
};
ImageImporter& DaemonDown() {
  static DaemonDownImporter* importer = new DaemonDownImporter();
  return *importer;
}

// What a restart must find of a preparation stage.
struct Promise {
  bool adopted = false;      // the release's metadata recorded
  bool begun = false;        // the generation recorded (PREPARING or further)
  std::set<std::string> stored;
  bool ready = false;
};

// What the durable state before the stage guarantees.
Promise Before(const PrepWorld& w, PrepStage stage) {
  Promise p;
  p.adopted = stage >= PrepStage::kBegin && stage != PrepStage::kWhole;
  p.begun = stage >= PrepStage::kResume && stage != PrepStage::kWhole;
  if (stage == PrepStage::kPutHelper || stage == PrepStage::kResume ||
      stage == PrepStage::kFinish) {
    p.stored.insert(w.artifacts[0].name);
  }
  if (stage == PrepStage::kResume || stage == PrepStage::kFinish) {
    p.stored.insert(w.artifacts[1].name);
  }
  p.ready = stage == PrepStage::kStartClearsPlan;
  if (p.ready) {
    p.adopted = p.begun = true;
    for (const auto& a : w.artifacts) p.stored.insert(a.name);
  }
  return p;
}

// What an OK result of the stage promises on top.
Promise OnOk(const PrepWorld& w, PrepStage stage) {
  Promise p = Before(w, stage);
  switch (stage) {
    case PrepStage::kStart:
    case PrepStage::kStartClearsPlan:
      break;
    case PrepStage::kAdopt:
      p.adopted = true;
      break;
    case PrepStage::kBegin:
    case PrepStage::kResume:
      p.adopted = p.begun = true;
      break;
    case PrepStage::kPutImage:
    case PrepStage::kPutImageOverlapped:
      p.stored.insert(w.artifacts[0].name);
      break;
    case PrepStage::kPutHelper:
      p.stored.insert(w.artifacts[1].name);
      break;
    case PrepStage::kFinish:
    case PrepStage::kWhole:
      p.adopted = p.begun = p.ready = true;
      break;
  }
  return p;
}

absl::Status Keep(const Promise& p, const Observed& o, const std::string& why) {
  if (p.adopted && !o.release_adopted) return Broken(absl::StrCat(why, ": the release is not adopted"));
  if (p.begun && o.state == Observed::State::kAbsent) {
    return Broken(absl::StrCat(why, ": the generation is not recorded"));
  }
  for (const std::string& a : p.stored) {
    if (!o.stored.contains(a)) return Broken(absl::StrCat(why, ": artifact ", a, " is not stored"));
  }
  if (p.ready && o.state != Observed::State::kReady) {
    return Broken(absl::StrCat(why, ": the generation is ", StateName(o.state), ", not READY"));
  }
  return absl::OkStatus();
}

void Setup(FaultFs& fs, const PrepWorld& w, PrepStage stage, bool with_held) {
  auto expect = [](const absl::Status& s, const char* what) {
    EXPECT_TRUE(s.ok()) << "setup: " << what << ": " << s;
  };
  expect(WriteInstallation(fs), "installation.json");
  if (stage == PrepStage::kStart) return;
  absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(fs, w);
  expect(p.status(), "start");
  if (!p.ok()) return;
  Privhelper& ph = **p;
  if (with_held) expect(Prepare(ph, w, w.held, *w.NewImporter()), "the held generation");
  if (stage == PrepStage::kAdopt || stage == PrepStage::kWhole) return;
  expect(AdoptRelease(ph, w), "adopt");
  if (stage == PrepStage::kBegin) return;
  expect(BeginPreparation(ph, w.target).status(), "begin");
  if (stage == PrepStage::kPutImage || stage == PrepStage::kPutImageOverlapped) return;
  expect(PutArtifact(ph, kCaseGeneration, w.artifacts[0]), "put image");
  if (stage == PrepStage::kPutHelper) return;
  expect(PutArtifact(ph, kCaseGeneration, w.artifacts[1]), "put helper");
  if (stage != PrepStage::kStartClearsPlan) return;
  expect(FinishPreparation(ph, kCaseGeneration, *w.NewImporter()), "finish");
  // The state of a crash after the final configuration, before the plan was removed.
  Plan plan = w.target.plan;
  plan.import_started = true;
  expect(fs.WriteFile(absl::StrCat("node/generations/", PlanName(kCaseGeneration)),
                      EncodePlan(plan)),
         "the plan written back");
}

absl::StatusOr<std::string> Operation(FaultFs& fs, const std::function<void()>& started,
                                      const PrepWorld& w, PrepStage stage) {
  ASSIGN_OR_RETURN(std::unique_ptr<Privhelper> p, StartPrivhelper(fs, w));
  if (stage == PrepStage::kStart || stage == PrepStage::kStartClearsPlan) {
    // A start reports what failed in it through the generations' states (Probe), not its
    // status: a FAILED one is this start's reported error.
    for (const GenerationStatus& s : p->generations->Statuses()) {
      if (s.state == GenerationState::kFailed) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the start reports generation ", s.generation, " FAILED (",
            std::string(DiagnosticCode(s.diagnostic.value_or(Diagnostic::kProviderUnavailable))),
            ")"));
      }
    }
    return std::string();
  }
  if (stage == PrepStage::kPutImage || stage == PrepStage::kPutImageOverlapped ||
      stage == PrepStage::kPutHelper || stage == PrepStage::kFinish) {
    // The Begin of this connection (WriteArtifact and Finish need one).
    RETURN_IF_ERROR(BeginPreparation(*p, w.target).status());
  }
  started();
  switch (stage) {
    case PrepStage::kStart:
    case PrepStage::kStartClearsPlan:
      break;
    case PrepStage::kAdopt:
      RETURN_IF_ERROR(AdoptRelease(*p, w));
      break;
    case PrepStage::kBegin:
    case PrepStage::kResume: {
      ASSIGN_OR_RETURN(std::vector<std::string> missing, BeginPreparation(*p, w.target));
      return absl::StrCat("missing: ", absl::StrJoin(missing, ", "));
    }
    case PrepStage::kPutImage:
      RETURN_IF_ERROR(PutArtifact(*p, kCaseGeneration, w.artifacts[0]));
      break;
    case PrepStage::kPutImageOverlapped:
      RETURN_IF_ERROR(PutArtifact(*p, kCaseGeneration, w.artifacts[0], &DaemonDown()));
      break;
    case PrepStage::kPutHelper:
      RETURN_IF_ERROR(PutArtifact(*p, kCaseGeneration, w.artifacts[1]));
      break;
    case PrepStage::kFinish:
      RETURN_IF_ERROR(FinishPreparation(*p, kCaseGeneration, *w.NewImporter()));
      break;
    case PrepStage::kWhole:
      RETURN_IF_ERROR(Prepare(*p, w, w.target, *w.NewImporter()));
      break;
  }
  return std::string(PrepStageName(stage));
}

absl::StatusOr<std::string> Restart(FaultFs& fs, const RunEnd& end, const PrepWorld& w,
                                    PrepStage stage, bool with_held) {
  absl::StatusOr<std::unique_ptr<Privhelper>> started = StartPrivhelper(fs, w);
  if (!started.ok()) {
    return Broken(absl::StrCat("the next start refuses: ", started.status().ToString()));
  }
  Privhelper& p = **started;
  ASSIGN_OR_RETURN(Observed o, Inspect(fs, p, w, with_held));
  RETURN_IF_ERROR(Keep(Before(w, stage), o, "durable before the operation"));
  if (end.result.ok()) RETURN_IF_ERROR(Keep(OnOk(w, stage), o, "the operation returned OK"));
  if (o.specification_recorded) {
    absl::StatusOr<std::vector<std::string>> other =
        p.generations->Begin(kCaseGeneration, w.other_specification, w.other_digest);
    if (!absl::IsFailedPrecondition(other.status())) {
      return Broken(absl::StrCat("another specification of a recorded generation: ",
                                 other.status().ToString()));
    }
    if (RecordDigests(fs) != o.records) return Broken("a refused specification changed records");
  }
  std::unique_ptr<ArchiveImporter> daemon = w.NewImporter();  // it lost every image
  absl::Status retry = Prepare(p, w, w.target, *daemon);
  if (!retry.ok()) {
    if (o.state == Observed::State::kFailed && absl::IsFailedPrecondition(retry) &&
        PrepDiagnosticOf(retry) == Diagnostic::kOwnershipRefused) {
      if (RecordDigests(fs) != o.records) return Broken("the refused retry changed records");
      return std::string("FAILED ownership_refused");
    }
    return Broken(absl::StrCat("the same preparation retried after a start with the generation ",
                               StateName(o.state), " fails: ", retry.ToString()));
  }
  if (o.state == Observed::State::kFailed) return Broken("a retry adopted a FAILED generation");
  ASSIGN_OR_RETURN(Observed after, Inspect(fs, p, w, with_held));
  if (after.state != Observed::State::kReady) {
    return Broken(absl::StrCat("the retry returned OK but left the generation ",
                               StateName(after.state)));
  }
  if (o.state != Observed::State::kReady && daemon->loads() != 1) {
    return Broken(absl::StrCat("the retry loaded the image ", daemon->loads(), " times"));
  }
  return absl::StrCat("READY ", Sha256Hex(after.final_record));
}

}  // namespace

CrashCase PublishOnceCase(const std::string& old, const std::string& fresh) {
  return PublishCase(old, fresh, /*once=*/true);
}

CrashCase PublishReplacingCase(const std::string& old, const std::string& fresh) {
  return PublishCase(old, fresh, /*once=*/false);
}

CrashCase InstallationCase() {
  CrashCase c;
  c.name = "LoadOrCreateInstallationId (first start)";
  c.operation = [](FaultFs& fs,
                   const std::function<void()>& started) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, OpenStateDir(fs));
    started();
    return LoadOrCreateInstallationId(fs, root, kOwner);
  };
  c.restart = [](FaultFs& fs, const RunEnd& end) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, OpenStateDir(fs));
    absl::StatusOr<std::string> id = LoadOrCreateInstallationId(fs, root, kOwner);
    if (!id.ok()) return Broken(absl::StrCat("the next start refuses: ", id.status().ToString()));
    if (end.result.ok() && *id != *end.result) {
      return Broken(absl::StrCat("two identities: the operation returned ", *end.result,
                                 ", the restart ", *id));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(root));
    if (names != std::vector<std::string>{kInstallationFile}) {
      return Broken(absl::StrCat("after the start the state directory holds ",
                                 absl::StrJoin(names, ", ")));
    }
    return *id;
  };
  return c;
}

const char* PrepStageName(PrepStage stage) {
  switch (stage) {
    case PrepStage::kStart: return "first start";
    case PrepStage::kStartClearsPlan: return "start clearing a plan beside its final configuration";
    case PrepStage::kAdopt: return "Adopt";
    case PrepStage::kBegin: return "Begin";
    case PrepStage::kResume: return "Begin (resumed after a restart)";
    case PrepStage::kPutImage: return "WriteArtifact+Commit (image archive)";
    case PrepStage::kPutImageOverlapped:
      return "WriteArtifact+Commit (image archive, its load overlapping the stream)";
    case PrepStage::kPutHelper: return "WriteArtifact+Commit (Runtime helper)";
    case PrepStage::kFinish: return "Finish";
    case PrepStage::kWhole: return "whole preparation";
  }
  return "?";
}

CrashCase PreparationCase(std::shared_ptr<const PrepWorld> world, PrepStage stage,
                          bool with_held) {
  CrashCase c;
  c.name = absl::StrCat(PrepStageName(stage), with_held ? " beside a READY generation" : "");
  c.setup = [world, stage, with_held](FaultFs& fs) { Setup(fs, *world, stage, with_held); };
  c.operation = [world, stage](FaultFs& fs, const std::function<void()>& started) {
    return Operation(fs, started, *world, stage);
  };
  c.restart = [world, stage, with_held](FaultFs& fs, const RunEnd& end) {
    return Restart(fs, end, *world, stage, with_held);
  };
  return c;
}

}  // namespace sn::privhelper::store

// Repair (issue 11; generations.h "Restart recovery and repair") as crash cases on FaultFs
// (crash_points.h): generation 3 is READY, then one of its Runtime files is removed (or the
// daemon loses its image) and privhelper starts, finds it NEEDS_REPAIR and repairs it as the
// agent drives it (adopt, Begin, PutArtifact of the missing file, Finish with the readiness
// probe). Every durable step is crashed (kill -9 and every power-loss variant), failed with
// EIO and ENOSPC, fsync-failed and filled up. Every restart must find:
//  - the generation's records exactly as before (final configuration, specification, lease
//    and identity byte for byte; no plan, no other record), nothing else in its directories,
//    no temporary in the release store, every artifact absent or complete with its bytes;
//  - the generation READY only if every file is there, the daemon holds its image and a
//    repair's readiness probe passed (or nothing was missing); NEEDS_REPAIR with what is
//    missing otherwise; never FAILED, never PREPARING (a crash is never a refusal);
//  - and the next repair from there succeeds, storing exactly the files still missing.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "privhelper/store/generations.h"
#include "tests/fakes/crash_points.h"
#include "tests/fakes/fault_fs.h"
#include "tests/privhelper/store/prep_crash_world.h"

namespace sn::privhelper::store {

using fs::CleanRun;
using fs::CrashCase;
using fs::ExpectNoViolations;
using fs::FaultFs;
using fs::RunByteBudgets;
using fs::RunClean;
using fs::RunCrashPoints;
using fs::RunEnd;
using fs::RunFailedSyncs;
using fs::RunFaultPoints;
namespace {

using release::testing::ArtifactBytes;

absl::Status Broken(const std::string& what) {
  return absl::InternalError(absl::StrCat("invariant broken: ", what));
}

std::string Gen(const std::string& name) { return absl::StrCat("node/generations/", name); }
std::string Rel(const std::string& name) { return absl::StrCat("releases/", kCaseSource, "/", name); }

// The records a repair must leave exactly as the preparation published them.
const char* const kRecords[] = {"3.specification", "3.images", "3.json", "3.lease",
                                 "3.lease-identity"};

struct RepairWorld {
  std::shared_ptr<const PrepWorld> w;
  std::string removed;  // the artifact removed before the start ("" = none)
  bool daemon_lost_image = false;
  std::map<std::string, std::string> records;  // as setup left them
  // The daemon (another process: privhelper's crashes do not reset it; each run starts it
  // as the case says).
  std::unique_ptr<ArchiveImporter> daemon;
  std::map<std::string, int64_t> found;  // what first restarts found, for the report
};

absl::Status Probe() { return absl::OkStatus(); }

void ResetDaemon(RepairWorld& rw) {
  rw.daemon = rw.w->NewImporter();
  if (!rw.daemon_lost_image) {
    const ArtifactBytes& archive = rw.w->artifacts[0];
    size_t at = 0;
    (void)rw.daemon->Load(
        [&](char* buf, size_t n) -> absl::StatusOr<size_t> {
          n = std::min(n, archive.bytes.size() - at);
          std::copy_n(archive.bytes.data() + at, n, buf);
          at += n;
          return n;
        },
        archive.bytes.size());
  }
}

// The agent's repair of generation 3: adopt, Begin, the missing files, Finish.
absl::StatusOr<std::vector<std::string>> Repair(Privhelper& p, const RepairWorld& rw) {
  RETURN_IF_ERROR(AdoptRelease(p, *rw.w));
  ASSIGN_OR_RETURN(std::vector<std::string> missing, BeginPreparation(p, rw.w->target));
  for (const ArtifactBytes& a : rw.w->artifacts) {
    if (std::find(missing.begin(), missing.end(), a.name) != missing.end()) {
      RETURN_IF_ERROR(PutArtifact(p, kCaseGeneration, a));
    }
  }
  RETURN_IF_ERROR(p.generations->Finish(kCaseGeneration, *rw.daemon, Probe));
  return missing;
}

GenerationStatus StatusOf(const GenerationStore& g) {
  for (const GenerationStatus& s : g.Statuses()) {
    if (s.generation == kCaseGeneration) return s;
  }
  return GenerationStatus{};
}

CrashCase RepairCase(std::shared_ptr<RepairWorld> rw) {
  CrashCase c;
  c.name = rw->removed.empty() ? "repair of an image the daemon lost"
                               : absl::StrCat("repair of the missing ", rw->removed);
  c.setup = [rw](FaultFs& fs) {
    ASSERT_TRUE(WriteInstallation(fs).ok());
    absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(fs, *rw->w);
    ASSERT_TRUE(p.ok()) << p.status();
    std::unique_ptr<ArchiveImporter> importer = rw->w->NewImporter();
    ASSERT_TRUE(Prepare(**p, *rw->w, rw->w->target, *importer).ok());
    for (const char* r : kRecords) {
      absl::StatusOr<std::string> bytes = fs.Contents(Gen(r));
      ASSERT_TRUE(bytes.ok()) << r;
      rw->records[r] = *bytes;
    }
    if (!rw->removed.empty()) {
      ASSERT_TRUE(fs.Remove(Rel(rw->removed)).ok());
    }
  };
  c.operation = [rw](FaultFs& fs,
                     const std::function<void()>& started) -> absl::StatusOr<std::string> {
    ResetDaemon(*rw);
    ASSIGN_OR_RETURN(std::unique_ptr<Privhelper> p, StartPrivhelper(fs, *rw->w));
    p->generations->Recheck(rw->daemon.get(), /*verify_bytes=*/true);
    if (StatusOf(*p->generations).state != GenerationState::kNeedsRepair) {
      return absl::InternalError("the start did not find the generation needing repair");
    }
    started();
    ASSIGN_OR_RETURN(std::vector<std::string> missing, Repair(*p, *rw));
    const std::vector<std::string> expected =
        rw->removed.empty() ? std::vector<std::string>{} : std::vector<std::string>{rw->removed};
    if (missing != expected) {
      return absl::InternalError(absl::StrCat("Begin asked for ", absl::StrJoin(missing, ",")));
    }
    return std::string("ready");
  };
  c.restart = [rw](FaultFs& fs, const RunEnd& end) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::unique_ptr<Privhelper>> started = StartPrivhelper(fs, *rw->w);
    if (!started.ok()) return Broken(absl::StrCat("the start failed: ", started.status().ToString()));
    Privhelper& p = **started;
    // Records: exactly as before, nothing added.
    ASSIGN_OR_RETURN(std::vector<std::string> names, fs.Names("node/generations"));
    for (const std::string& n : names) {
      if (!rw->records.count(n)) return Broken(absl::StrCat("node/generations/", n, " appeared"));
    }
    for (const auto& [name, bytes] : rw->records) {
      absl::StatusOr<std::string> now = fs.Contents(Gen(name));
      if (!now.ok() || *now != bytes) return Broken(absl::StrCat(name, " changed or vanished"));
    }
    // The release store: metadata and artifacts only, each absent or complete.
    ASSIGN_OR_RETURN(std::vector<std::string> stored, fs.Names(absl::StrCat("releases/", kCaseSource)));
    std::vector<std::string> absent;
    for (const ArtifactBytes& a : rw->w->artifacts) {
      absl::StatusOr<std::string> now = fs.Contents(Rel(a.name));
      if (!now.ok()) {
        absent.push_back(a.name);
      } else if (*now != a.bytes) {
        return Broken(absl::StrCat(a.name, " is stored half-written or with other bytes"));
      }
    }
    for (const std::string& n : stored) {
      const bool artifact = n == rw->w->artifacts[0].name || n == rw->w->artifacts[1].name;
      if (!artifact && n != "manifest.json" && n != "manifest.json.sig" && n != "SHA256SUMS") {
        return Broken(absl::StrCat("releases/", kCaseSource, "/", n, " was left"));
      }
    }
    // The state: READY only with every file there and the image held; never refused.
    p.generations->Recheck(rw->daemon.get(), /*verify_bytes=*/true);
    const GenerationStatus st = StatusOf(*p.generations);
    const bool image_held = rw->daemon->Resolve({rw->w->image_identity}).ok();
    if (st.state == GenerationState::kReady) {
      if (!absent.empty() || !image_held) return Broken("READY with a file or the image missing");
    } else if (st.state == GenerationState::kNeedsRepair) {
      const Diagnostic want =
          !absent.empty() ? Diagnostic::kRuntimeMissing : Diagnostic::kImageMissing;
      if (st.diagnostic != want) return Broken("NEEDS_REPAIR with another diagnostic");
      if (absent.empty() && image_held) return Broken("NEEDS_REPAIR with nothing missing");
      if (end.result.ok() && !end.second_restart) {
        return Broken("the repair returned OK but the start finds it needs repair");
      }
    } else {
      return Broken(absl::StrCat("the generation is in state ", static_cast<int>(st.state)));
    }
    if (!end.second_restart) {
      ++rw->found[st.state == GenerationState::kReady ? "READY" : "NEEDS_REPAIR"];
    }
    // The next repair recovers it, storing exactly what is still absent.
    if (st.state == GenerationState::kNeedsRepair) {
      absl::StatusOr<std::vector<std::string>> missing = Repair(p, *rw);
      if (!missing.ok()) return Broken(absl::StrCat("the next repair failed: ", missing.status().ToString()));
      if (*missing != absent) return Broken("the next repair asked for other files than absent");
      if (!p.generations->Ready(kCaseGeneration)) return Broken("not READY after the repair");
    }
    return std::string("ready");
  };
  return c;
}

class RepairCrashTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { InitLogging("privhelper", LogLevel::kError); }
};

std::shared_ptr<RepairWorld> World(int kind) {
  auto rw = std::make_shared<RepairWorld>();
  rw->w = MakePrepWorld();
  if (kind == 0) rw->removed = rw->w->artifacts[0].name;  // the image archive
  if (kind == 1) rw->removed = rw->w->artifacts[1].name;  // the Runtime helper
  // The image archive is gone: the daemon lost the image too, so it is imported again from
  // the repaired archive.
  rw->daemon_lost_image = kind == 0 || kind == 2;
  return rw;
}

TEST_P(RepairCrashTest, RepairInterruptedAnywhereKeepsTheRecordsAndNeverReadiesUnprobed) {
  std::shared_ptr<RepairWorld> rw = World(GetParam());
  const CrashCase c = RepairCase(rw);
  const CleanRun clean = RunClean(c);
  ASSERT_TRUE(clean.result.ok()) << clean.result.status();
  ExpectNoViolations(RunCrashPoints(c), "crash");
  ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(EIO, "injected")), "eio");
  ExpectNoViolations(RunFaultPoints(c, ErrnoStatus(ENOSPC, "injected")), "enospc");
  ExpectNoViolations(RunFailedSyncs(c, ErrnoStatus(EIO, "injected fsync")), "fsync");
  if (clean.bytes_written > 0) ExpectNoViolations(RunByteBudgets(c), "full");
  if (!rw->removed.empty()) {
    // The sweep reached both outcomes: a file not yet durable, and a repaired generation.
    EXPECT_GT(rw->found["NEEDS_REPAIR"], 0);
    EXPECT_GT(rw->found["READY"], 0);
  }
  std::cout << "REPAIR-FOUND " << c.name << ": NEEDS_REPAIR=" << rw->found["NEEDS_REPAIR"]
            << " READY=" << rw->found["READY"] << "\n";
}

INSTANTIATE_TEST_SUITE_P(Kinds, RepairCrashTest, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(i.param == 0   ? "ImageArchive"
                                              : i.param == 1 ? "RuntimeHelper"
                                                             : "DaemonImage");
                         });

}  // namespace
}  // namespace sn::privhelper::store

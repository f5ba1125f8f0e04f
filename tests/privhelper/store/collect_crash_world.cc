// The world and the setups of the collection crash cases (collect_crash_cases.h).
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "privhelper/store/collection_records.h"
#include "tests/privhelper/store/collect_crash_cases.h"
#include "tests/privhelper/store/collect_crash_internal.h"

namespace sn::privhelper::store {

using fs::FaultFs;

using release::testing::ArtifactBytes;
using release::testing::Describe;

namespace {

CaseGeneration MakeGeneration(const PrepWorld& w, int64_t generation,
                              const std::vector<ArtifactBytes>& artifacts) {
  wire::SpecificationDocument d;
  d.generation = generation;
  d.provider = kCaseProvider;
  d.runtime_source = kCaseSource;
  for (const ArtifactBytes& a : artifacts) d.artifacts.push_back(Describe(a));
  d.images.push_back({"busybox", "busybox.tar", {w.image_identity}});
  CaseGeneration g;
  g.generation = generation;
  g.specification = wire::EncodeSpecificationDocument(d);
  g.digest = Sha256Hex(g.specification);
  g.plan.installation_id = kCaseInstallation;
  g.plan.generation = generation;
  g.plan.specification_digest = g.digest;
  g.plan.source = kCaseSource;
  for (const wire::RuntimeArtifact& a : d.artifacts) {
    g.plan.artifacts.push_back(
        {a.name, a.kind, a.sha256, a.size, ArtifactPath(kCaseSource, a.name)});
  }
  return g;
}

void Expect(const absl::Status& s, const std::string& what) {
  EXPECT_TRUE(s.ok()) << "setup: " << what << ": " << s;
}

// The step of `log` (1-based) that unlinks release file `name`, or 0.
int64_t UnlinkStep(const std::vector<std::string>& log, const std::string& name) {
  for (size_t i = 0; i < log.size(); ++i) {
    if (absl::StrContains(log[i], " unlink ") && absl::EndsWith(log[i], "/" + name)) {
      return static_cast<int64_t>(i) + 1;
    }
  }
  return 0;
}

}  // namespace

const char* CollectStageName(CollectStage stage) {
  switch (stage) {
    case CollectStage::kReady:
      return "CollectGeneration of a READY generation beside another";
    case CollectStage::kPlanNotImported:
      return "CollectGeneration of a plan (import not started)";
    case CollectStage::kImportStartedMissing:
      return "CollectGeneration of a plan (import started, a file missing)";
    case CollectStage::kResumed:
      return "CollectGeneration resumed from its journal";
    case CollectStage::kResumedNativeDone:
      return "CollectGeneration resumed after native_done, a file removed";
    case CollectStage::kStartClearsJournal:
      return "a start clearing a journal beside its dropped marker, then CollectGeneration";
  }
  return "?";
}

std::shared_ptr<const CollectWorld> MakeCollectWorld() {
  release::PrivateKey key = release::testing::NewKey();
  auto w = std::make_shared<CollectWorld>(key.public_key());
  PrepWorld& p = w->prep;
  p.image_identity = "sha256:" + std::string(64, 'c');
  std::string archive = p.image_identity + "\nan image archive: ";
  for (int i = 0; archive.size() < 300; ++i) absl::StrAppend(&archive, "layer ", i, "; ");
  p.artifacts = {
      ArtifactBytes{"busybox.tar", "image", archive},
      ArtifactBytes{"helper", "helper", "#!/bin/false\n# generation 3's helper\n"},
      ArtifactBytes{"seccomp.json", "seccomp", "{\"defaultAction\":\"SCMP_ACT_ERRNO\"}\n"}};
  p.release = release::testing::MakeRelease(key, kCaseSource, p.artifacts);
  w->kept = MakeGeneration(p, kKeptGeneration, {p.artifacts[0]});
  w->collected = MakeGeneration(p, kCollectedGeneration, p.artifacts);
  return w;
}

CollectHooks CountingHooks(int* native_calls, std::vector<std::string>* images) {
  CollectHooks h;
  h.unreferenced = [] { return absl::OkStatus(); };
  h.native_cleanup = [native_calls, images](const std::vector<std::string>& native,
                                             const std::vector<PlannedArtifact>&) {
    ++*native_calls;
    if (images != nullptr) *images = native;
    return absl::OkStatus();  // Docker: the daemon keeps every image
  };
  return h;
}

absl::Status CollectThree(Privhelper& p, const CollectWorld& w, const CollectHooks& hooks) {
  return p.generations->Collect(kCollectedGeneration, w.collected.digest, hooks);
}

void SetupCollection(FaultFs& fs, const CollectWorld& w, CollectStage stage) {
  Expect(WriteInstallation(fs), "installation.json");
  const PrepWorld& pw = w.prep;
  {
    absl::StatusOr<std::unique_ptr<Privhelper>> started = StartPrivhelper(fs, pw);
    Expect(started.status(), "start");
    if (!started.ok()) return;
    Privhelper& p = **started;
    Expect(Prepare(p, pw, w.kept, *pw.NewImporter()), "generation 2");
    switch (stage) {
      case CollectStage::kReady:
      case CollectStage::kResumed:
      case CollectStage::kResumedNativeDone:
      case CollectStage::kStartClearsJournal:
        Expect(Prepare(p, pw, w.collected, *pw.NewImporter()), "generation 3");
        break;
      case CollectStage::kPlanNotImported:
      case CollectStage::kImportStartedMissing: {
        Expect(BeginPreparation(p, w.collected).status(), "begin 3");
        Expect(PutArtifact(p, kCollectedGeneration, pw.artifacts[1]), "put the helper");
        if (stage == CollectStage::kPlanNotImported) break;
        Expect(PutArtifact(p, kCollectedGeneration, pw.artifacts[2]), "put the profile");
        ArchiveImporter broken({});  // a daemon that loads nothing: the import fails
        EXPECT_FALSE(FinishPreparation(p, kCollectedGeneration, broken).ok());
        break;
      }
    }
    if (stage == CollectStage::kResumed) {
      int calls = 0;
      CollectHooks h = CountingHooks(&calls, nullptr);
      h.native_cleanup = [](const std::vector<std::string>&, const std::vector<PlannedArtifact>&) {
        return absl::UnavailableError("the daemon went away");
      };
      EXPECT_FALSE(CollectThree(p, w, h).ok());
    }
  }
  if (stage == CollectStage::kImportStartedMissing) {
    Expect(fs.Remove(absl::StrCat("releases/", kCaseSource, "/seccomp.json")), "lose the profile");
  }
  if (stage != CollectStage::kResumedNativeDone && stage != CollectStage::kStartClearsJournal) {
    return;
  }
  // A collection that failed removing the profile (after native_done and the helper's
  // removal), or removing its journal (after the marker): find that step on a copy, then fail
  // it.
  fs.KillProcess();
  int calls = 0;
  int64_t step = 0;
  {
    FaultFs copy(fs.options(), fs.Snapshot());
    absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(copy, pw);
    Expect(p.status(), "start (copy)");
    if (!p.ok()) return;
    Expect(CollectThree(**p, w, CountingHooks(&calls, nullptr)), "collect (copy)");
    step = UnlinkStep(copy.step_log(), stage == CollectStage::kResumedNativeDone
                                           ? "seccomp.json"
                                           : CollectionJournalName(kCollectedGeneration));
  }
  ASSERT_GT(step, 0) << "no step removes the file";
  absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(fs, pw);
  Expect(p.status(), "start");
  if (!p.ok()) return;
  fs.FailStep(step, ErrnoStatus(EIO, "setup"));
  EXPECT_FALSE(CollectThree(**p, w, CountingHooks(&calls, nullptr)).ok());
  fs.ClearFaults();
}

Baseline TakeBaseline(const CollectWorld& w, CollectStage stage) {
  FaultFs fs;
  SetupCollection(fs, w, stage);
  fs.Crash({fs.PendingDirOps(), FaultFs::UnsyncedData::kKept});
  Baseline b;
  for (const std::string& dir : {std::string(kGenerationsDir), ReleaseDir()}) {
    absl::StatusOr<std::vector<std::string>> names = fs.Names(dir);
    EXPECT_TRUE(names.ok()) << names.status();
    if (!names.ok()) continue;
    for (const std::string& n : *names) {
      absl::StatusOr<std::string> bytes = fs.Contents(absl::StrCat(dir, "/", n));
      EXPECT_TRUE(bytes.ok()) << bytes.status();
      if (bytes.ok()) b.files[absl::StrCat(dir, "/", n)] = *bytes;
    }
  }
  for (int64_t g : {kKeptGeneration, kCollectedGeneration}) {
    absl::StatusOr<FileInfo> lease = StatPath(fs, absl::StrCat(kGenerationsDir, "/", LeaseName(g)));
    if (lease.ok()) b.leases[g] = *lease;
  }
  for (size_t i = 1; i < w.prep.artifacts.size(); ++i) {
    const std::string path = ReleasePath(w.prep.artifacts[i].name);
    if (b.files.contains(path)) b.own_stored.insert(w.prep.artifacts[i].name);
  }
  b.journal = b.files.contains(GenerationPath(CollectionJournalName(kCollectedGeneration)));
  const bool refused = stage == CollectStage::kImportStartedMissing;
  for (const auto& [path, bytes] : b.files) {
    if (!absl::StartsWith(path, ReleaseDir() + "/")) continue;
    const std::string name = path.substr(ReleaseDir().size() + 1);
    if (refused || (name != "helper" && name != "seccomp.json")) b.survivors.insert(name);
  }
  return b;
}

}  // namespace sn::privhelper::store

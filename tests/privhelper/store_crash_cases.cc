#include "tests/privhelper/store_crash_cases.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/installation.h"

namespace sn::privhelper::store {
namespace {

constexpr char kRecordDir[] = "recs";
constexpr char kRecord[] = "r";
constexpr char kProvider[] = "docker";
const std::string kNativeImage = "sha256:" + std::string(64, 'a');

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
  c.operation = [fresh, once](FaultFs& fs) -> absl::StatusOr<std::string> {
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

}  // namespace

std::string CaseSpecification(const std::string& image) {
  wire::SpecificationDocument d;
  d.generation = kCaseGeneration;
  d.provider = kProvider;
  d.runtime_source = "rel-1";
  d.artifacts.push_back({"busybox.tar", "image", std::string(64, '1'), 0});
  d.images.push_back({image, "busybox.tar", {kNativeImage}});
  return wire::EncodeSpecificationDocument(d);
}

CrashCase PublishOnceCase(const std::string& old, const std::string& fresh) {
  return PublishCase(old, fresh, /*once=*/true);
}

CrashCase PublishReplacingCase(const std::string& old, const std::string& fresh) {
  return PublishCase(old, fresh, /*once=*/false);
}

CrashCase InstallationCase(bool temporaries_removed) {
  CrashCase c;
  c.name = "LoadOrCreateInstallationId (first start)";
  c.operation = [](FaultFs& fs) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, fs.Root());
    return LoadOrCreateInstallationId(fs, root, kOwner);
  };
  c.restart = [temporaries_removed](FaultFs& fs,
                                    const RunEnd& end) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, fs.Root());
    absl::StatusOr<std::string> id = LoadOrCreateInstallationId(fs, root, kOwner);
    if (!id.ok()) return Broken(absl::StrCat("the next start refuses: ", id.status().ToString()));
    if (end.result.ok() && *id != *end.result) {
      return Broken(absl::StrCat("two identities: the operation returned ", *end.result,
                                 ", the restart ", *id));
    }
    if (temporaries_removed) {
      ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(root));
      if (names != std::vector<std::string>{kInstallationFile}) {
        return Broken(absl::StrCat("after the start the state directory holds ",
                                   absl::StrJoin(names, ", ")));
      }
    }
    return *id;
  };
  return c;
}

CrashCase RegisterCase(bool from_empty_state) {
  const std::string spec = CaseSpecification("busybox");
  const std::string digest = Sha256Hex(spec);
  const std::string other = CaseSpecification("alpine");
  const std::string other_digest = Sha256Hex(other);
  CrashCase c;
  c.name = absl::StrCat("GenerationStore::Open + Register (",
                        from_empty_state ? "empty state" : "node/generations/ durable", ")");
  if (!from_empty_state) c.setup = [](FaultFs& fs) { (void)fs.MakeDirs("node/generations"); };
  c.operation = [=](FaultFs& fs) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, fs.Root());
    ASSIGN_OR_RETURN(std::unique_ptr<GenerationStore> store,
                     GenerationStore::Open(fs, root, kOwner, kCaseInstallation, kProvider));
    RETURN_IF_ERROR(store->Register(kCaseGeneration, spec, digest));
    return std::string();
  };
  auto open = [](FaultFs& fs, const Dir& root) {
    return GenerationStore::Open(fs, root, kOwner, kCaseInstallation, kProvider);
  };
  c.restart = [=](FaultFs& fs, const RunEnd& end) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, fs.Root());
    absl::StatusOr<std::unique_ptr<GenerationStore>> store = open(fs, root);
    if (!store.ok()) {
      return Broken(absl::StrCat("the next start refuses: ", store.status().ToString()));
    }
    ASSIGN_OR_RETURN(Dir node, fs.OpenDirAt(root, "node"));
    ASSIGN_OR_RETURN(Dir gens, fs.OpenDirAt(node, "generations"));
    ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(gens));
    for (const std::string& n : names) {
      if (n != SpecificationRecordName(kCaseGeneration) &&
          n != FinalConfigurationName(kCaseGeneration)) {
        return Broken(absl::StrCat("node/generations holds ", n));
      }
    }
    std::shared_ptr<const HeldGeneration> held = (*store)->Find(kCaseGeneration);
    const std::string adopted = held ? absl::StrCat("held ", digest) : "";
    if (end.result.ok() && !held) {
      return Broken("Register returned OK but after the restart the generation is not held");
    }
    absl::StatusOr<std::string> recorded = ReadPrivateRecord(
        fs, gens, SpecificationRecordName(kCaseGeneration), wire::kMaxHttpBodyBytes, kOwner);
    if (recorded.ok() && *recorded != spec) {
      return Broken(absl::StrCat("the specification record holds ", Quote(*recorded)));
    }
    if (!recorded.ok() && !absl::IsNotFound(recorded.status())) {
      return Broken(absl::StrCat("the specification record: ", recorded.status().ToString()));
    }
    if (held) {
      if (held->specification_digest != digest || held->images.size() != 1 ||
          held->images[0].name != "busybox" || held->images[0].native_image != kNativeImage) {
        return Broken("the held generation is not what was registered");
      }
      if (!recorded.ok()) return Broken("held without its specification record");
    }
    if (recorded.ok()) {
      absl::Status s = (*store)->Register(kCaseGeneration, other, other_digest);
      if (!absl::IsFailedPrecondition(s)) {
        return Broken(absl::StrCat("other bytes for a recorded generation: ", s.ToString()));
      }
    }
    if (absl::Status s = (*store)->Register(kCaseGeneration, spec, digest); !s.ok()) {
      return Broken(absl::StrCat("the same registration does not complete: ", s.ToString()));
    }
    if (!absl::IsFailedPrecondition((*store)->Register(kCaseGeneration, other, other_digest))) {
      return Broken("other bytes are not refused once the generation is held");
    }
    if (held) return adopted;
    // What this restart completed is durable: a power loss now still finds it held. (Whether
    // what Open adopted was durable is the harness's second power loss.)
    FaultFs later(fs.options(), fs.Snapshot());
    later.Crash();
    ASSIGN_OR_RETURN(Dir root2, later.Root());
    absl::StatusOr<std::unique_ptr<GenerationStore>> store2 = open(later, root2);
    if (!store2.ok() || (*store2)->Find(kCaseGeneration) == nullptr) {
      return Broken("the completed registration did not survive a power loss");
    }
    return adopted;
  };
  return c;
}

CrashCase OpenCase() {
  CrashCase c;
  c.name = "GenerationStore::Open (empty state)";
  c.operation = [](FaultFs& fs) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, fs.Root());
    RETURN_IF_ERROR(
        GenerationStore::Open(fs, root, kOwner, kCaseInstallation, kProvider).status());
    return std::string();
  };
  c.restart = [](FaultFs& fs, const RunEnd&) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Dir root, fs.Root());
    absl::StatusOr<std::unique_ptr<GenerationStore>> store =
        GenerationStore::Open(fs, root, kOwner, kCaseInstallation, kProvider);
    if (!store.ok()) {
      return Broken(absl::StrCat("the next start refuses: ", store.status().ToString()));
    }
    if (!(*store)->empty()) return Broken("a generation is held that nobody registered");
    ASSIGN_OR_RETURN(Dir node, fs.OpenDirAt(root, "node"));
    ASSIGN_OR_RETURN(Dir gens, fs.OpenDirAt(node, "generations"));
    ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(gens));
    if (!names.empty()) return Broken(absl::StrCat("node/generations holds ", names[0]));
    return std::string();
  };
  return c;
}

}  // namespace sn::privhelper::store

#include "tests/privhelper/store/prep_crash_world.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/release/layout.h"
#include "common/release/signing.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/lease.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper::store {

using fs::FaultFs;
namespace {

using release::testing::ArtifactBytes;
using release::testing::Describe;

constexpr char kStatePath[] = "/state";
constexpr char kGenerationsPath[] = "node/generations";
constexpr char kImageName[] = "busybox";
constexpr char kImageArtifact[] = "busybox.tar";
constexpr char kHelperArtifact[] = "helper";

absl::Status Broken(const std::string& what) {
  return absl::InternalError(absl::StrCat("invariant broken: ", what));
}

std::string Quote(const std::string& s) {
  return absl::StrCat("\"", s.size() > 60 ? s.substr(0, 60) + "..." : s, "\"");
}

std::string Specification(const PrepWorld& w, int64_t generation, const std::string& image) {
  wire::SpecificationDocument d;
  d.generation = generation;
  d.provider = kCaseProvider;
  d.runtime_source = kCaseSource;
  for (const ArtifactBytes& a : w.artifacts) d.artifacts.push_back(Describe(a));
  d.images.push_back({image, kImageArtifact, {w.image_identity}});
  return wire::EncodeSpecificationDocument(d);
}

CaseGeneration MakeGeneration(const PrepWorld& w, int64_t generation) {
  CaseGeneration g;
  g.generation = generation;
  g.specification = Specification(w, generation, kImageName);
  g.digest = Sha256Hex(g.specification);
  g.plan.installation_id = kCaseInstallation;
  g.plan.generation = generation;
  g.plan.specification_digest = g.digest;
  g.plan.source = kCaseSource;
  for (const ArtifactBytes& a : w.artifacts) {
    const wire::RuntimeArtifact d = Describe(a);
    g.plan.artifacts.push_back(
        {d.name, d.kind, d.sha256, d.size, absl::StrCat("releases/", kCaseSource, "/", d.name)});
  }
  return g;
}

std::string GenPath(const std::string& name) { return absl::StrCat(kGenerationsPath, "/", name); }
std::string RelPath(std::string_view name) {
  return absl::StrCat("releases/", kCaseSource, "/", absl::string_view(name.data(), name.size()));
}

// NotFound, or the volatile bytes of `path`.
absl::StatusOr<std::string> Read(FaultFs& fs, const std::string& path) {
  return fs.Contents(path);
}

bool Exists(FaultFs& fs, const std::string& path) {
  absl::StatusOr<std::vector<std::string>> names = fs.Names(path.substr(0, path.rfind('/')));
  if (!names.ok()) return false;
  const std::string leaf = path.substr(path.rfind('/') + 1);
  return std::find(names->begin(), names->end(), leaf) != names->end();
}

absl::Status OnlyNames(FaultFs& fs, const std::string& dir, const std::set<std::string>& allowed) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs.Names(dir));
  for (const std::string& n : names) {
    if (!allowed.contains(n)) {
      return Broken(absl::StrCat(dir.empty() ? "the state directory" : dir, " holds ", n,
                                 " after a start"));
    }
  }
  return absl::OkStatus();
}

std::set<std::string> GenerationNames(int64_t g) {
  return {SpecificationRecordName(g), PlanName(g), ImagesDerivedName(g),
          FinalConfigurationName(g), LeaseName(g), LeaseIdentityName(g)};
}

// The lease of `g` and its identity record bind each other, the installation and `digest`.
absl::Status CheckLease(FaultFs& fs, const Dir& gens, int64_t g, const std::string& digest) {
  ASSIGN_OR_RETURN(FileInfo lease, fs.StatAt(gens, LeaseName(g)));
  if (lease.type != FileType::kRegular || lease.nlink != 1 || lease.uid != kOwner ||
      (lease.mode & 077) != 0) {
    return Broken(absl::StrCat("the lease of ", g, " is not a private regular file"));
  }
  absl::StatusOr<std::string> text = Read(fs, GenPath(LeaseIdentityName(g)));
  if (!text.ok()) return Broken(absl::StrCat("the lease of ", g, " has no identity record"));
  absl::StatusOr<LeaseIdentity> id = DecodeLeaseIdentity(*text);
  if (!id.ok()) return Broken(absl::StrCat("the identity of ", g, " is torn: ", Quote(*text)));
  const LeaseIdentity want{kCaseInstallation, g, digest, lease.dev, lease.ino, lease.birth_ns};
  if (*id != want) {
    return Broken(absl::StrCat("the identity of ", g, " does not bind its lease: ",
                               Quote(*text), " for inode ", lease.ino, " born ",
                               lease.birth_ns));
  }
  return absl::OkStatus();
}

// A READY generation is held with exactly the records an uninterrupted preparation makes.
absl::Status CheckReady(FaultFs& fs, Privhelper& p, const Dir& gens, const PrepWorld& w,
                        const CaseGeneration& g) {
  const int64_t n = g.generation;
  std::shared_ptr<const HeldGeneration> held = p.generations->Find(n);
  if (held == nullptr) return Broken(absl::StrCat(n, " is READY but not held"));
  absl::StatusOr<std::string> final_record = Read(fs, GenPath(FinalConfigurationName(n)));
  if (!final_record.ok() || *final_record != g.final_record) {
    return Broken(absl::StrCat("READY ", n, " with the final configuration ",
                               final_record.ok() ? Quote(*final_record) : "missing",
                               ", not the one an uninterrupted preparation publishes"));
  }
  absl::StatusOr<std::string> spec = Read(fs, GenPath(SpecificationRecordName(n)));
  if (!spec.ok() || *spec != g.specification) {
    return Broken(absl::StrCat("READY ", n, " without its exact specification record"));
  }
  if (Exists(fs, GenPath(PlanName(n)))) return Broken(absl::StrCat("READY ", n, " keeps a plan"));
  if (held->specification_digest != g.digest || held->source != kCaseSource ||
      held->artifacts != g.plan.artifacts || held->helper_artifact != kHelperArtifact ||
      held->images.size() != 1 || held->images[0].name != kImageName ||
      held->images[0].artifact != kImageArtifact ||
      held->images[0].native_image != w.image_identity) {
    return Broken(absl::StrCat("READY ", n, " holds another generation than it prepared"));
  }
  RETURN_IF_ERROR(CheckLease(fs, gens, n, g.digest));
  absl::StatusOr<std::unique_ptr<FileLock>> lock = p.generations->LockShared(n);
  if (!lock.ok()) {
    return Broken(absl::StrCat("READY ", n, " but its lease refuses: ", lock.status().ToString()));
  }
  absl::StatusOr<std::string> helper = p.generations->HelperPath(n);
  if (!helper.ok() || *helper != absl::StrCat(kStatePath, "/", RelPath(kHelperArtifact))) {
    return Broken(absl::StrCat("READY ", n, " cannot run its helper: ",
                               helper.ok() ? *helper : helper.status().ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string RecordDigests(FaultFs& fs) {
  std::string out;
  for (const std::string& dir : {std::string(kGenerationsPath), RelPath("")}) {
    std::string d = dir;
    if (!d.empty() && d.back() == '/') d.pop_back();
    absl::StatusOr<std::vector<std::string>> names = fs.Names(d);
    if (!names.ok()) continue;
    for (const std::string& n : *names) {
      absl::StatusOr<std::string> bytes = fs.Contents(absl::StrCat(d, "/", n));
      absl::StrAppend(&out, d, "/", n, " ", bytes.ok() ? Sha256Hex(*bytes) : "?", "\n");
    }
  }
  return out;
}

absl::Status ArchiveImporter::Load(const Source& source, uint64_t size) {
  ++loads_;
  std::string bytes;
  char buf[64];  // small reads: the archive is streamed, never asked for whole
  while (bytes.size() < size) {
    ASSIGN_OR_RETURN(size_t n, source(buf, std::min<uint64_t>(sizeof buf, size - bytes.size())));
    if (n == 0) return absl::DataLossError("the archive ended early");
    bytes.append(buf, n);
  }
  auto it = archives_.find(bytes);
  if (it == archives_.end()) {
    return absl::InvalidArgumentError("not an image archive this daemon can load");
  }
  held_.insert(it->second);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ArchiveImporter::ArchiveIdentity(const Source& source, const Skip&,
                                                              uint64_t size) {
  std::string bytes;
  char buf[64];
  while (bytes.size() < size) {
    ASSIGN_OR_RETURN(size_t n, source(buf, std::min<uint64_t>(sizeof buf, size - bytes.size())));
    if (n == 0) return absl::DataLossError("the archive ended early");
    bytes.append(buf, n);
  }
  auto it = archives_.find(bytes);
  if (it == archives_.end()) return absl::InvalidArgumentError("not an image archive");
  return it->second;
}

absl::StatusOr<std::string> ArchiveImporter::Resolve(const std::string& identity) {
  if (held_.contains(identity)) return identity;
  return absl::NotFoundError("the daemon does not hold the image");
}

std::unique_ptr<ArchiveImporter> PrepWorld::NewImporter() const {
  std::map<std::string, std::string> archives;
  for (const ArtifactBytes& a : artifacts) {
    if (a.kind == "image") archives[a.bytes] = image_identity;
  }
  return std::make_unique<ArchiveImporter>(std::move(archives));
}

const char* StateName(Observed::State s) {
  switch (s) {
    case Observed::State::kAbsent: return "absent";
    case Observed::State::kPreparing: return "PREPARING";
    case Observed::State::kReady: return "READY";
    case Observed::State::kFailed: return "FAILED";
  }
  return "?";
}

std::shared_ptr<const PrepWorld> MakePrepWorld() {
  release::PrivateKey key = release::testing::NewKey();
  auto w = std::make_shared<PrepWorld>(key.public_key());
  w->image_identity = "sha256:" + std::string(64, 'c');
  std::string archive = w->image_identity + "\nan image archive: ";
  for (int i = 0; archive.size() < 300; ++i) absl::StrAppend(&archive, "layer ", i, "; ");
  w->artifacts = {ArtifactBytes{kImageArtifact, "image", archive},
                  ArtifactBytes{kHelperArtifact, "helper", "#!/bin/false\n# the Runtime helper\n"}};
  w->release = release::testing::MakeRelease(key, kCaseSource, w->artifacts);
  w->target = MakeGeneration(*w, kCaseGeneration);
  w->held = MakeGeneration(*w, kHeldGeneration);
  w->other_specification = Specification(*w, kCaseGeneration, "alpine");
  w->other_digest = Sha256Hex(w->other_specification);
  // The final configurations an uninterrupted preparation publishes.
  FaultFs fs;
  EXPECT_TRUE(WriteInstallation(fs).ok());
  absl::StatusOr<std::unique_ptr<Privhelper>> p = StartPrivhelper(fs, *w);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return w;
  for (CaseGeneration* g : {&w->held, &w->target}) {
    absl::Status s = Prepare(**p, *w, *g, *w->NewImporter());
    EXPECT_TRUE(s.ok()) << s;
    absl::StatusOr<std::string> final_record = fs.Contents(GenPath(FinalConfigurationName(g->generation)));
    EXPECT_TRUE(final_record.ok()) << final_record.status();
    if (final_record.ok()) g->final_record = *final_record;
  }
  return w;
}

absl::Status WriteInstallation(FaultFs& fs) {
  return fs.WriteFile(kInstallationFile,
                      absl::StrCat("{\"installation_id\":\"", kCaseInstallation,
                                   "\",\"schema\":1}\n"));
}

absl::StatusOr<Dir> OpenStateDir(FaultFs& fs) {
  ASSIGN_OR_RETURN(Dir root, fs.Root());
  RETURN_IF_ERROR(fs.SyncDir(root));
  return root;
}

absl::StatusOr<std::unique_ptr<Privhelper>> StartPrivhelper(FaultFs& fs, const PrepWorld& w) {
  auto p = std::make_unique<Privhelper>();
  ASSIGN_OR_RETURN(p->root, OpenStateDir(fs));
  ASSIGN_OR_RETURN(p->installation_id, LoadOrCreateInstallationId(fs, p->root, kOwner));
  ASSIGN_OR_RETURN(p->releases, ReleaseStore::Open(fs, p->root, kStatePath, kOwner, w.key));
  ASSIGN_OR_RETURN(p->generations,
                   GenerationStore::Open(fs, p->root, kOwner, p->installation_id, kCaseProvider,
                                         p->releases.get()));
  return p;
}

absl::Status AdoptRelease(Privhelper& p, const PrepWorld& w) {
  return p.releases
      ->Adopt(kCaseSource, w.release.manifest_bytes, w.release.signature_file, w.release.sums)
      .status();
}

absl::StatusOr<std::vector<std::string>> BeginPreparation(Privhelper& p,
                                                          const CaseGeneration& g) {
  return p.generations->Begin(g.generation, g.specification, g.digest);
}

absl::Status PutArtifact(Privhelper& p, int64_t generation, const ArtifactBytes& a,
                         ImageImporter* overlap) {
  ASSIGN_OR_RETURN(std::unique_ptr<ReleaseStore::Writer> w,
                   p.generations->WriteArtifact(generation, a.name, 0, overlap));
  const size_t half = a.bytes.size() / 2;
  RETURN_IF_ERROR(w->Append(std::string_view(a.bytes).substr(0, half)));
  RETURN_IF_ERROR(w->Append(std::string_view(a.bytes).substr(half)));
  return w->Commit();
}

absl::Status FinishPreparation(Privhelper& p, int64_t generation, ImageImporter& importer) {
  return p.generations->Finish(generation, importer);
}

absl::Status Prepare(Privhelper& p, const PrepWorld& w, const CaseGeneration& g,
                     ImageImporter& importer) {
  RETURN_IF_ERROR(AdoptRelease(p, w));
  ASSIGN_OR_RETURN(std::vector<std::string> missing, BeginPreparation(p, g));
  for (const ArtifactBytes& a : w.artifacts) {
    if (std::find(missing.begin(), missing.end(), a.name) != missing.end()) {
      RETURN_IF_ERROR(PutArtifact(p, g.generation, a));
    }
  }
  return FinishPreparation(p, g.generation, importer);
}

absl::StatusOr<Observed> Inspect(FaultFs& fs, Privhelper& p, const PrepWorld& w,
                                 bool expect_held) {
  Observed o;
  o.records = RecordDigests(fs);
  // Nothing but the known records; no temporaries.
  RETURN_IF_ERROR(OnlyNames(fs, "", {kInstallationFile, "node", "releases"}));
  RETURN_IF_ERROR(OnlyNames(fs, "node", {"generations"}));
  std::set<std::string> allowed = GenerationNames(kCaseGeneration);
  if (expect_held) allowed.merge(GenerationNames(kHeldGeneration));
  RETURN_IF_ERROR(OnlyNames(fs, kGenerationsPath, allowed));
  RETURN_IF_ERROR(OnlyNames(fs, "releases", {kCaseSource}));
  std::set<std::string> release_names = {std::string(release::kManifestFileName),
                                         std::string(release::kSignatureFileName),
                                         std::string(release::kSumsFileName)};
  for (const ArtifactBytes& a : w.artifacts) release_names.insert(a.name);
  if (Exists(fs, absl::StrCat("releases/", kCaseSource))) {
    RETURN_IF_ERROR(OnlyNames(fs, absl::StrCat("releases/", kCaseSource), release_names));
  }
  // The release's metadata: absent, or the adopted bytes; it loads iff all of it is there.
  int metadata = 0;
  for (const auto& [name, bytes] :
       {std::pair{release::kManifestFileName, &w.release.manifest_bytes},
        std::pair{release::kSignatureFileName, &w.release.signature_file},
        std::pair{release::kSumsFileName, &w.release.sums}}) {
    absl::StatusOr<std::string> got = Read(fs, RelPath(name));
    if (!got.ok()) continue;
    if (*got != *bytes) {
      return Broken(absl::StrCat(RelPath(name), " holds ", Quote(*got),
                                 ", not the adopted bytes"));
    }
    ++metadata;
  }
  o.release_adopted = metadata == 3;
  absl::StatusOr<release::VerifiedRelease> loaded = p.releases->Load(kCaseSource);
  if (o.release_adopted ? !loaded.ok() : !absl::IsNotFound(loaded.status())) {
    return Broken(absl::StrCat(metadata, " of 3 metadata files recorded, and Load says ",
                               loaded.status().ToString()));
  }
  // Artifacts: absent, or complete, verified and private.
  for (const ArtifactBytes& a : w.artifacts) {
    absl::Status s = p.releases->Check(kCaseSource, Describe(a));
    if (absl::IsNotFound(s)) continue;
    if (!s.ok()) return Broken(absl::StrCat("artifact ", a.name, " is stored but ", s.ToString()));
    o.stored.insert(a.name);
  }
  // The generations.
  ASSIGN_OR_RETURN(Dir node, fs.OpenDirAt(p.root, "node"));
  ASSIGN_OR_RETURN(Dir gens, fs.OpenDirAt(node, "generations"));
  const CaseGeneration& t = w.target;
  const int64_t g = t.generation;
  absl::StatusOr<std::string> spec = Read(fs, GenPath(SpecificationRecordName(g)));
  if (spec.ok() && *spec != t.specification) {
    return Broken(absl::StrCat("the specification record holds ", Quote(*spec)));
  }
  o.specification_recorded = spec.ok();
  std::optional<GenerationStatus> status;
  bool held_seen = false;
  for (const GenerationStatus& s : p.generations->Statuses()) {
    if (s.generation == g) {
      status = s;
    } else if (expect_held && s.generation == kHeldGeneration &&
               s.state == GenerationState::kReady) {
      held_seen = true;
    } else {
      return Broken(absl::StrCat("a start reports generation ", s.generation));
    }
  }
  if (expect_held) {
    if (!held_seen) return Broken("the generation held before is no longer READY");
    RETURN_IF_ERROR(CheckReady(fs, p, gens, w, w.held));
  }
  absl::StatusOr<std::string> plan_text = Read(fs, GenPath(PlanName(g)));
  const bool has_plan = plan_text.ok();
  const bool has_final = Exists(fs, GenPath(FinalConfigurationName(g)));
  const bool has_lease = Exists(fs, GenPath(LeaseName(g)));
  const bool has_identity = Exists(fs, GenPath(LeaseIdentityName(g)));
  auto plan_matches = [&]() -> absl::Status {
    absl::StatusOr<Plan> plan = DecodePlan(*plan_text);
    if (!plan.ok() || !plan->SameAs(t.plan)) {
      return Broken(absl::StrCat("the plan does not match the specification: ",
                                 Quote(*plan_text)));
    }
    return absl::OkStatus();
  };
  if (!status.has_value()) {
    if (has_plan || has_final || has_lease || has_identity) {
      return Broken("records of the generation exist but a start does not report it");
    }
    return o;
  }
  if (status->specification_digest != t.digest) {
    return Broken(absl::StrCat("reported with digest ", status->specification_digest));
  }
  switch (status->state) {
    case GenerationState::kPreparing:
      o.state = Observed::State::kPreparing;
      if (!has_plan) return Broken("PREPARING without a plan");
      RETURN_IF_ERROR(plan_matches());
      if (!o.specification_recorded) return Broken("a plan without its specification record");
      if (has_final) return Broken("PREPARING with a final configuration");
      if (p.generations->Find(g) != nullptr) return Broken("PREPARING yet held");
      if (has_lease) {
        RETURN_IF_ERROR(CheckLease(fs, gens, g, t.digest));
      } else if (has_identity) {
        return Broken("an identity record without its lease");
      }
      return o;
    case GenerationState::kReady:
      o.state = Observed::State::kReady;
      RETURN_IF_ERROR(CheckReady(fs, p, gens, w, t));
      if (o.stored.size() != w.artifacts.size()) return Broken("READY without its artifacts");
      o.final_record = t.final_record;
      return o;
    case GenerationState::kFailed:
      o.state = Observed::State::kFailed;
      if (status->diagnostic != Diagnostic::kOwnershipRefused) {
        return Broken(absl::StrCat(
            "FAILED with ", std::string(status->diagnostic ? DiagnosticCode(*status->diagnostic)
                                                           : std::string_view("nothing"))));
      }
      if (!has_lease || has_identity || has_final) {
        return Broken("FAILED (ownership_refused) but not a lease without its identity");
      }
      if (!has_plan) return Broken("FAILED without its plan kept");
      RETURN_IF_ERROR(plan_matches());
      if (p.generations->Find(g) != nullptr) return Broken("FAILED yet held");
      return o;
    case GenerationState::kCollecting:
    case GenerationState::kDropped:
      return Broken("a preparation left a collection record");
    case GenerationState::kNeedsRepair:
      return Broken("a start that checks nothing found it needing repair");
  }
  return Broken("unknown state");
}

}  // namespace sn::privhelper::store

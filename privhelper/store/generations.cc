#include "privhelper/store/generations.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/atomic_file.h"
#include "common/error_cause.h"
#include "common/log.h"
#include "common/release/failure.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/wire/limits.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"
#include "privhelper/store/durable.h"
#include "privhelper/store/final_config.h"
#include "privhelper/store/lease.h"
#include "privhelper/store/overlapped_load.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper::store {
namespace {

using json = nlohmann::json;

absl::Status Invalid(std::string_view why) {
  return PrepFailure(absl::StatusCode::kInvalidArgument, Diagnostic::kConfigurationInvalid, why);
}
absl::Status Refused(Diagnostic d, std::string_view why) {
  return PrepFailure(absl::StatusCode::kFailedPrecondition, d, why);
}

// The plan a specification and its verified release call for.
Plan PlanFor(const std::string& installation, int64_t generation, std::string_view digest,
             const wire::SpecificationDocument& spec) {
  Plan p;
  p.installation_id = installation;
  p.generation = generation;
  p.specification_digest = std::string(digest);
  p.source = spec.runtime_source;
  for (const wire::RuntimeArtifact& a : spec.artifacts) {
    p.artifacts.push_back(
        {a.name, a.kind, a.sha256, a.size, ArtifactPath(spec.runtime_source, a.name)});
  }
  return p;
}

const PlannedArtifact* FindArtifact(const Plan& p, std::string_view name) {
  for (const PlannedArtifact& a : p.artifacts) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

wire::RuntimeArtifact AsRuntime(const PlannedArtifact& a) {
  return wire::RuntimeArtifact{a.name, a.kind, a.sha256, a.size};
}

}  // namespace

GenerationStore::GenerationStore(Fs& fs, Dir node, Dir dir, uint32_t owner,
                                 std::string installation_id, std::string provider,
                                 ReleaseStore* releases)
    : fs_(fs),
      node_(std::move(node)),
      dir_(std::move(dir)),
      owner_(owner),
      installation_id_(std::move(installation_id)),
      provider_(std::move(provider)),
      releases_(releases) {}

absl::Status GenerationStore::Move(int64_t generation, Entry& e, Phase to) {
  absl::Status s = e.life.MoveTo(to);
  if (s.ok()) return s;
  LogError("a generation transition the lifecycle table does not list was refused",
           {{"generation", generation}, {"error", std::string(s.message())}});
  // The generation changed under the step (another step moved it meanwhile): retry later.
  return PrepFailure(absl::StatusCode::kUnavailable, Diagnostic::kProviderUnavailable,
                     std::string_view(s.message().data(), s.message().size()));
}

std::vector<GenerationStatus> GenerationStore::Statuses() const {
  absl::MutexLock lock(&mu_);
  std::vector<GenerationStatus> out;
  for (const auto& [g, e] : entries_) out.push_back({g, e.digest, e.state(), e.diagnostic});
  return out;
}

std::shared_ptr<const HeldGeneration> GenerationStore::Find(int64_t generation) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(generation);
  if (it == entries_.end() || !IsHeld(it->second.phase())) return nullptr;
  return it->second.held;
}

bool GenerationStore::Ready(int64_t generation) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(generation);
  return it != entries_.end() && it->second.phase() == Phase::kReady;
}

bool GenerationStore::empty() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [g, e] : entries_) {
    if (IsHeld(e.phase())) return false;
  }
  return true;
}

void GenerationStore::SetMaxGenerations(int64_t n) {
  absl::MutexLock lock(&mu_);
  max_generations_ = n;
}

absl::StatusOr<std::vector<std::string>> GenerationStore::Begin(int64_t generation,
                                                                std::string_view specification,
                                                                std::string_view digest) {
  if (generation <= 0) return Invalid("generation must be positive");
  if (!wire::IsDigest(digest)) return Invalid("specification_digest is not a digest");
  if (specification.size() > wire::kMaxHttpBodyBytes) return Invalid("specification over 1 MiB");
  if (Sha256Hex(specification) != digest) {
    return Invalid("the specification does not hash to its digest");
  }
  absl::StatusOr<wire::SpecificationDocument> spec =
      wire::DecodeSpecificationDocument(specification);
  if (!spec.ok()) return Invalid(absl::StrCat("the specification fails spec §6: ",
                                              spec.status().message()));
  if (spec->generation != generation) return Invalid("the specification names another generation");
  if (spec->provider != provider_) return Invalid("the specification names another provider");
  bool e_repair = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(generation);
    if (it != entries_.end()) {
      const Entry& e = it->second;
      if (e.state() == GenerationState::kFailed) {
        return Refused(*e.diagnostic, "this generation's records refuse adoption");
      }
      if (e.state() == GenerationState::kDropped || e.state() == GenerationState::kCollecting) {
        return Refused(Diagnostic::kConfigurationInvalid,
                       "this generation was dropped (or is being collected); it is never "
                       "prepared again");
      }
      if (e.digest != digest) {
        return Refused(Diagnostic::kConfigurationInvalid,
                       "this generation is recorded with another specification");
      }
      if (e.state() == GenerationState::kReady) return std::vector<std::string>{};
      if (e.state() == GenerationState::kNeedsRepair) {
        if (e.phase() == Phase::kRepairFinishing) {
          return absl::UnavailableError("a repair of this generation is running");
        }
        e_repair = true;
      }
    } else {
      // A generation not recorded yet: the caps (see kMaxPreparingGenerations).
      int64_t records = 0;
      int preparing = 0;
      for (const auto& [g, e] : entries_) {
        if (e.phase() != Phase::kDropped) ++records;
        if (e.phase() == Phase::kPreparing) ++preparing;
      }
      if (records >= max_generations_) {
        LogWarning("preparation of a new generation refused: max_generations records held",
                   {{"generation", generation}, {"records", records},
                    {"max_generations", max_generations_}});
        return Refused(Diagnostic::kStorageExhausted,
                       absl::StrCat("privhelper holds ", records, " generation records (its "
                                    "max_generations); a generation must be collected first"));
      }
      if (preparing >= kMaxPreparingGenerations) {
        LogWarning("preparation of a new generation refused: generations already preparing",
                   {{"generation", generation}, {"preparing", static_cast<int64_t>(preparing)}});
        return Refused(Diagnostic::kStorageExhausted,
                       absl::StrCat(preparing, " generations are preparing already; one must "
                                    "finish or be collected first"));
      }
    }
  }
  if (e_repair) return BeginRepair(generation, specification, *std::move(spec));
  absl::StatusOr<release::VerifiedRelease> rel = releases_->Load(spec->runtime_source);
  if (absl::IsNotFound(rel.status())) {
    return Refused(Diagnostic::kConfigurationInvalid, "the release was not adopted first");
  }
  if (!rel.ok()) return rel.status();
  if (absl::Status s = release::CheckSpecificationAgainstManifest(*spec, rel->manifest()); !s.ok()) {
    return Invalid(std::string(s.message()));
  }
  // The specification, write-once; an earlier attempt must agree.
  absl::Status s = PublishOnce(fs_, dir_, SpecificationRecordName(generation), specification);
  if (absl::IsAlreadyExists(s)) {
    ASSIGN_OR_RETURN(std::string existing,
                     ReadPrivateRecord(fs_, dir_, SpecificationRecordName(generation),
                                       wire::kMaxHttpBodyBytes, owner_));
    if (existing != specification) {
      return Refused(Diagnostic::kConfigurationInvalid,
                     "another specification of this generation is recorded");
    }
  } else if (!s.ok()) {
    return s;
  }
  // The plan, before any artifact; a resumed preparation must find the same plan.
  Plan plan = PlanFor(installation_id_, generation, digest, *spec);
  absl::StatusOr<std::string> existing =
      ReadPrivateRecord(fs_, dir_, PlanName(generation), kMaxPlanBytes, owner_);
  if (existing.ok()) {
    absl::StatusOr<Plan> recorded = DecodePlan(*existing);
    if (!recorded.ok() || !recorded->SameAs(plan)) {
      return Refused(Diagnostic::kConfigurationInvalid, "the recorded plan drifted");
    }
    plan = *std::move(recorded);
  } else if (absl::IsNotFound(existing.status())) {
    RETURN_IF_ERROR(PublishOnce(fs_, dir_, PlanName(generation), EncodePlan(plan)));
  } else {
    return existing.status();
  }
  std::vector<std::string> missing;
  for (const PlannedArtifact& a : plan.artifacts) {
    absl::Status stored = releases_->Check(plan.source, AsRuntime(a));
    if (absl::IsNotFound(stored)) {
      missing.push_back(a.name);
    } else if (!stored.ok()) {
      return stored;
    }
  }
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[generation];
  RETURN_IF_ERROR(Move(generation, e, Phase::kPreparing));
  e.digest = std::string(digest);
  e.plan = std::move(plan);
  e.spec = *std::move(spec);
  return missing;
}

GenerationStore::~GenerationStore() { StopOverlappedLoad(); }

absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> GenerationStore::HeldPartials(
    int64_t generation, const std::vector<std::string>& missing) {
  Plan plan;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(generation);
    if (it == entries_.end() || !it->second.plan.has_value()) {
      return Refused(Diagnostic::kConfigurationInvalid, "no preparation of this generation began");
    }
    plan = *it->second.plan;
  }
  std::vector<std::pair<std::string, uint64_t>> held;
  for (const PlannedArtifact& a : plan.artifacts) {
    if (std::find(missing.begin(), missing.end(), a.name) == missing.end()) {
      RETURN_IF_ERROR(releases_->DiscardPartial(plan.source, a.name));
      continue;
    }
    ASSIGN_OR_RETURN(uint64_t n, releases_->HeldPartial(plan.source, AsRuntime(a)));
    if (n > 0) held.emplace_back(a.name, n);
  }
  return held;
}

absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> GenerationStore::WriteArtifact(
    int64_t generation, std::string_view name, uint64_t offset, ImageImporter* overlap) {
  std::string source;
  PlannedArtifact artifact;
  std::string no_overlap;  // why the archive is not loaded while it streams
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(generation);
    if (it == entries_.end() || !it->second.plan.has_value() || !it->second.spec.has_value()) {
      return Refused(Diagnostic::kConfigurationInvalid, "no preparation of this generation began");
    }
    const PlannedArtifact* a = FindArtifact(*it->second.plan, name);
    if (a == nullptr) return Invalid("the plan names no such artifact");
    if (it->second.repair_missing.has_value() && !it->second.repair_missing->count(a->name)) {
      return Refused(Diagnostic::kConfigurationInvalid,
                     "a repair stores only the files its Begin found missing");
    }
    source = it->second.plan->source;
    artifact = *a;
    bool is_image = false;
    for (const wire::SpecImage& image : it->second.spec->images) {
      if (image.artifact == a->name) is_image = true;
    }
    if (it->second.repair_missing.has_value()) {
      no_overlap = "a repair imports from the store in its Finish";
    } else if (it->second.phase() != Phase::kPreparing) {
      no_overlap = "the generation is not being prepared";
    } else if (!is_image) {
      no_overlap = "the plan does not name this artifact as a Docker image";
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ReleaseStore::Writer> w,
                   releases_->Write(source, AsRuntime(artifact), offset));
  if (overlap == nullptr) return w;
  if (no_overlap.empty()) {
    ASSIGN_OR_RETURN(no_overlap, StartOverlappedLoad(generation, artifact, *w, *overlap));
  }
  if (no_overlap.empty()) {
    LogInfo("loading the image archive while it streams",
            {{"generation", generation}, {"artifact", artifact.name}, {"offset", offset},
             {"bytes", artifact.size}, {"withheld_bytes", OverlappedLoad::kWithheldBytes}});
  } else {
    LogInfo("no overlapped load: the archive is only stored",
            {{"generation", generation}, {"artifact", artifact.name}, {"reason", no_overlap}});
  }
  return w;
}

absl::Status GenerationStore::Finish(int64_t generation, ImageImporter& importer,
                                     const std::function<absl::Status()>& provider_ready) {
  Plan plan;
  wire::SpecificationDocument spec;
  bool repair = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(generation);
    if (it == entries_.end()) return Refused(Diagnostic::kConfigurationInvalid, "no preparation");
    if (it->second.state() == GenerationState::kReady) return absl::OkStatus();
    if (it->second.state() == GenerationState::kNeedsRepair) {
      if (!it->second.repair_missing.has_value() || !it->second.spec.has_value()) {
        return Refused(Diagnostic::kConfigurationInvalid,
                       "no repair of this generation began on this connection");
      }
      if (it->second.phase() == Phase::kRepairFinishing) {
        return absl::UnavailableError("a repair step is running");
      }
      RETURN_IF_ERROR(Move(generation, it->second, Phase::kRepairFinishing));
      repair = true;
    } else if (it->second.phase() != Phase::kPreparing) {
      return Refused(Diagnostic::kConfigurationInvalid, "this generation is not being prepared");
    } else if (!it->second.plan.has_value() || !it->second.spec.has_value()) {
      return Refused(Diagnostic::kConfigurationInvalid,
                     "no preparation of this generation began on this connection");
    }
    if (!repair) {
      plan = *it->second.plan;
      spec = *it->second.spec;
    }
  }
  if (repair) return FinishRepair(generation, importer, provider_ready);
  std::shared_ptr<const HeldGeneration> held;
  absl::Status s = Publish(generation, plan, spec, importer, &held);
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[generation];
  if (!s.ok()) {
    if (absl::IsFailedPrecondition(s) && CauseOf(s).has_value() &&
        CauseOf(s)->code == Diagnostic::kOwnershipRefused &&
        Move(generation, e, Phase::kFailed).ok()) {
      e.diagnostic = Diagnostic::kOwnershipRefused;
    }
    return s;
  }
  RETURN_IF_ERROR(Move(generation, e, Phase::kReady));
  e.plan.reset();
  e.spec.reset();
  e.held = std::move(held);
  LogInfo("generation ready", {{"generation", generation},
                               {"specification_digest", e.digest}});
  return absl::OkStatus();
}

absl::Status GenerationStore::Publish(int64_t g, const Plan& planned,
                                      const wire::SpecificationDocument& spec,
                                      ImageImporter& importer,
                                      std::shared_ptr<const HeldGeneration>* held) {
  // Every artifact again, from the store: a file changed since it was written refuses. One
  // this process's Writer verified and published moments ago is not hashed again while it is
  // still the published file (ReleaseStore::CheckRecent); after a restart, every one is.
  for (const PlannedArtifact& a : planned.artifacts) {
    absl::Status stored = releases_->CheckRecent(planned.source, AsRuntime(a));
    if (absl::IsNotFound(stored)) {
      return release::TransferFailure(absl::StrCat("artifact ", a.name, " was not stored"));
    }
    RETURN_IF_ERROR(stored);
  }
  Plan plan = planned;
  if (!plan.import_started) {
    plan.import_started = true;
    RETURN_IF_ERROR(PublishReplacing(fs_, dir_, PlanName(g), EncodePlan(plan)));
  }
  HeldGeneration h;
  h.generation = g;
  h.specification_digest = plan.specification_digest;
  h.source = plan.source;
  h.artifacts = plan.artifacts;
  for (const PlannedArtifact& a : plan.artifacts) {
    if (a.kind == "helper") h.helper_artifact = a.name;
  }
  // The image a generation runs is the one its signed archive produces: the identity is
  // derived from the verified archive's bytes and must be one the specification accepts; only
  // that image is resolved, loaded first unless the backend already holds exactly it.
  for (const wire::SpecImage& image : spec.images) {
    const PlannedArtifact* a = FindArtifact(plan, image.artifact);
    if (a == nullptr) return Invalid("an image names no artifact of the plan");
    ASSIGN_OR_RETURN(std::string identity,
                     ArchiveIdentity(importer, plan.source, *a, &image.identities));
    const bool loaded = OverlappedLoadCompleted(g, plan.source, image.artifact);
    absl::StatusOr<std::string> native = importer.Resolve(identity);
    if (absl::IsNotFound(native.status()) && loaded) {
      return Refused(Diagnostic::kConfigurationInvalid,
                     "the imported archive did not produce the image it names");
    }
    if (absl::IsNotFound(native.status())) {
      ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> archive,
                       releases_->OpenArtifact(plan.source, a->name));
      LogInfo("importing an image", {{"generation", g}, {"artifact", a->name},
                                     {"bytes", a->size}});
      RETURN_IF_ERROR(importer.Load(
          [&archive](char* buf, size_t n) { return archive->Read(buf, n); },
          static_cast<uint64_t>(a->size)));
      native = importer.Resolve(identity);
      if (absl::IsNotFound(native.status())) {
        return Refused(Diagnostic::kConfigurationInvalid,
                       "the imported archive did not produce the image it names");
      }
    }
    RETURN_IF_ERROR(native.status());
    h.images.push_back({image.name, image.artifact, *native});
  }
  RETURN_IF_ERROR(CreateLease(fs_, dir_, owner_, g, installation_id_, plan.specification_digest));
  const std::string final_record = EncodeFinal(h, installation_id_, provider_);
  RETURN_IF_ERROR(PublishReplacing(fs_, dir_, ImagesDerivedName(g),
                                   EncodeImagesDerived(g, installation_id_, final_record)));
  absl::Status s = PublishOnce(fs_, dir_, FinalConfigurationName(g), final_record);
  if (absl::IsAlreadyExists(s)) {
    // An earlier attempt published it and failed after (its directory fsync, say): the same
    // record is adopted once made durable; another one refuses.
    absl::StatusOr<std::string> recorded =
        ReadPrivateRecord(fs_, dir_, FinalConfigurationName(g), kMaxFinalBytes, owner_);
    if (!recorded.ok() || *recorded != final_record) {
      return Refused(Diagnostic::kConfigurationInvalid,
                     "another final configuration of this generation is recorded");
    }
    RETURN_IF_ERROR(fs_.SyncDir(dir_));
  } else if (!s.ok()) {
    return s;
  }
  RETURN_IF_ERROR(fs_.UnlinkAt(dir_, PlanName(g)));
  RETURN_IF_ERROR(fs_.SyncDir(dir_));
  *held = std::make_shared<const HeldGeneration>(std::move(h));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PlannedArtifact>> GenerationStore::RecordedArtifacts(
    int64_t g, bool* import_started, std::string* source) {
  absl::StatusOr<std::string> final_text =
      ReadPrivateRecord(fs_, dir_, FinalConfigurationName(g), kMaxFinalBytes, owner_);
  if (final_text.ok()) {
    absl::StatusOr<HeldGeneration> h = DecodeFinal(*final_text, installation_id_, provider_);
    if (!h.ok() || h->generation != g) {
      return absl::FailedPreconditionError(absl::StrCat(
          "generation ", g, "'s final configuration cannot be read, so its references are "
          "unknown"));
    }
    *import_started = true;
    *source = h->source;
    return h->artifacts;
  }
  if (!absl::IsNotFound(final_text.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("generation ", g, "'s final configuration: ", final_text.status().message()));
  }
  absl::StatusOr<std::string> plan_text =
      ReadPrivateRecord(fs_, dir_, PlanName(g), kMaxPlanBytes, owner_);
  if (absl::IsNotFound(plan_text.status())) {
    *import_started = false;
    source->clear();
    return std::vector<PlannedArtifact>{};  // a lease or specification alone references nothing
  }
  absl::StatusOr<Plan> plan =
      plan_text.ok() ? DecodePlan(*plan_text) : absl::StatusOr<Plan>(plan_text.status());
  if (!plan.ok() || plan->generation != g || plan->installation_id != installation_id_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "generation ", g, "'s preparation plan cannot be read, so its references are unknown"));
  }
  *import_started = plan->import_started;
  *source = plan->source;
  return plan->artifacts;
}

std::vector<std::string> GenerationStore::NativeImages(int64_t g) {
  std::vector<std::string> out;
  absl::StatusOr<std::string> text =
      ReadPrivateRecord(fs_, dir_, FinalConfigurationName(g), kMaxFinalBytes, owner_);
  if (!text.ok()) return out;
  absl::StatusOr<HeldGeneration> h = DecodeFinal(*text, installation_id_, provider_);
  if (!h.ok()) return out;
  for (const HeldImage& i : h->images) out.push_back(i.native_image);
  return out;
}

absl::StatusOr<std::vector<std::string>> GenerationStore::UnsharedNativeImages(int64_t g) {
  std::vector<int64_t> others;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [o, e] : entries_) {
      if (o != g && e.phase() != Phase::kDropped) others.push_back(o);
    }
  }
  std::set<std::string> held;
  for (int64_t o : others) {
    absl::StatusOr<std::string> text =
        ReadPrivateRecord(fs_, dir_, FinalConfigurationName(o), kMaxFinalBytes, owner_);
    if (absl::IsNotFound(text.status())) continue;  // not final yet: it names no image
    absl::StatusOr<HeldGeneration> h =
        text.ok() ? DecodeFinal(*text, installation_id_, provider_) : text.status();
    if (!h.ok()) {
      return absl::UnavailableError(absl::StrCat("generation ", o,
                                                 "'s final configuration cannot be read: ",
                                                 h.status().message()));
    }
    for (const HeldImage& i : h->images) held.insert(i.native_image);
  }
  std::vector<std::string> out;
  for (std::string& i : NativeImages(g)) {
    if (held.count(i) == 0) out.push_back(std::move(i));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<FileLock>> GenerationStore::LockShared(int64_t generation) {
  std::shared_ptr<const HeldGeneration> held = Find(generation);
  if (held == nullptr) return Refused(Diagnostic::kConfigurationInvalid, "not held");
  return OpenLease(fs_, dir_, owner_, generation, installation_id_, held->specification_digest,
                   LockMode::kShared);
}

absl::StatusOr<std::string> GenerationStore::HelperPath(int64_t generation) {
  std::shared_ptr<const HeldGeneration> held = Find(generation);
  if (held == nullptr) return Refused(Diagnostic::kConfigurationInvalid, "not held");
  if (held->helper_artifact.empty()) return std::string();
  for (const PlannedArtifact& a : held->artifacts) {
    if (a.name != held->helper_artifact) continue;
    RETURN_IF_ERROR(releases_->Check(held->source, AsRuntime(a)));
    return releases_->AbsolutePath(held->source, a.name);
  }
  return Refused(Diagnostic::kConfigurationInvalid, "the helper artifact is not recorded");
}

}  // namespace sn::privhelper::store

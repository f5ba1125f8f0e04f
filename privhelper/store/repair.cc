// GenerationStore's restart recovery and repair (docs/architecture.md, "A generation's
// lifecycle"; requirements "Restart recovery"; docs/formats.md: repair writes no record of its
// own).
#include "absl/strings/str_cat.h"
#include "common/error_cause.h"
#include "common/log.h"
#include "common/release/failure.h"
#include "common/release/verify.h"
#include "common/status_macros.h"
#include "common/wire/limits.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/final_config.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/lease.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper::store {
namespace {

absl::Status Refused(Diagnostic d, std::string_view why) {
  return PrepFailure(absl::StatusCode::kFailedPrecondition, d, why);
}

wire::RuntimeArtifact AsRuntime(const PlannedArtifact& a) {
  return wire::RuntimeArtifact{a.name, a.kind, a.sha256, a.size};
}

// A stored file that is there but not what the manifest declares refuses, with the diagnostic
// that says why: other bytes are configuration_invalid (the generation's configuration no
// longer matches what is stored), links or ownership stay ownership_refused. Anything else
// (an I/O error) is returned as it is: nothing is concluded from it.
absl::Status Conflict(const PlannedArtifact& a, const absl::Status& st) {
  if (release::FailureClassOf(st).has_value()) {
    return Refused(Diagnostic::kConfigurationInvalid,
                   absl::StrCat("stored artifact ", a.name, " holds other bytes than its "
                                "release declares (", st.message(), "); nothing is repaired"));
  }
  return st;
}

// A refusal that makes the generation FAILED (kept as found), not a transient failure.
bool IsRefusal(const absl::Status& st) {
  if (!absl::IsFailedPrecondition(st) && !absl::IsInvalidArgument(st)) return false;
  const std::optional<ErrorCause> c = CauseOf(st);
  return c.has_value() && (c->code == Diagnostic::kConfigurationInvalid ||
                           c->code == Diagnostic::kOwnershipRefused);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> GenerationStore::MissingArtifacts(
    const HeldGeneration& h, bool verify_bytes) {
  std::vector<std::string> missing;
  for (const PlannedArtifact& a : h.artifacts) {
    absl::Status st;
    if (verify_bytes) {
      st = releases_->Check(h.source, AsRuntime(a));
    } else {
      // Presence and size only (a probe); anything unexpected gets the full check.
      absl::StatusOr<uint64_t> size = releases_->StoredSize(h.source, a.name);
      if (!size.ok() || *size != static_cast<uint64_t>(a.size)) {
        st = releases_->Check(h.source, AsRuntime(a));
      }
    }
    if (absl::IsNotFound(st)) {
      missing.push_back(a.name);
    } else if (!st.ok()) {
      return Conflict(a, st);
    }
  }
  return missing;
}

absl::StatusOr<std::optional<Diagnostic>> GenerationStore::Inspect(const HeldGeneration& h,
                                                                   ImageImporter* importer,
                                                                   bool verify_bytes) {
  ASSIGN_OR_RETURN(std::vector<std::string> missing, MissingArtifacts(h, verify_bytes));
  if (!missing.empty()) return std::optional<Diagnostic>(Diagnostic::kRuntimeMissing);
  if (importer == nullptr) return std::optional<Diagnostic>();
  for (const HeldImage& image : h.images) {
    absl::StatusOr<std::string> native = importer->Resolve(image.native_image);
    if (absl::IsNotFound(native.status())) {
      return std::optional<Diagnostic>(Diagnostic::kImageMissing);
    }
    RETURN_IF_ERROR(native.status());
  }
  return std::optional<Diagnostic>();
}

void GenerationStore::Recheck(ImageImporter* importer, bool verify_bytes) {
  std::vector<std::shared_ptr<const HeldGeneration>> ready;
  {
    absl::MutexLock lock(&mu_);
    if (collecting_) return;  // a collection removes files meanwhile; the next probe checks
    for (const auto& [g, e] : entries_) {
      if (e.state() == GenerationState::kReady && e.held != nullptr) ready.push_back(e.held);
    }
  }
  for (const std::shared_ptr<const HeldGeneration>& h : ready) {
    // At start, a generation published before its images were derived from their archives is
    // checked once (a missing archive is repair's: Inspect finds it below). One that cannot be
    // checked is not used in this run, whatever the reason; the next start checks it again.
    if (verify_bytes && importer != nullptr) {
      absl::Status derived = VerifyImagesDerived(*h, *importer);
      if (!derived.ok() && !absl::IsNotFound(derived)) {
        absl::MutexLock lock(&mu_);
        auto it = entries_.find(h->generation);
        if (it != entries_.end() && it->second.state() == GenerationState::kReady &&
            it->second.held == h && Move(h->generation, it->second, Phase::kFailed).ok()) {
          it->second.diagnostic = PrepDiagnosticOf(derived);
          LogError("a ready generation's images could not be checked against their archives; "
                   "it is not used (kept as found)",
                   {{"generation", h->generation},
                    {"diagnostic", DiagnosticCode(*it->second.diagnostic)},
                    {"error", std::string(derived.message())}});
        }
        continue;
      }
    }
    absl::StatusOr<std::optional<Diagnostic>> found = Inspect(*h, importer, verify_bytes);
    if (!found.ok() && !IsRefusal(found.status())) {
      LogWarning("cannot check a ready generation's Runtime files or images; checked again at "
                 "the next probe",
                 {{"generation", h->generation}, {"error", found.status().ToString()}});
      continue;
    }
    if (found.ok() && !found->has_value()) continue;
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(h->generation);
    // Only the generation as it was found: a collection or repair since then decides.
    if (it == entries_.end() || it->second.state() != GenerationState::kReady ||
        it->second.held != h || collecting_) {
      continue;
    }
    Entry& e = it->second;
    if (!found.ok()) {
      if (!Move(h->generation, e, Phase::kFailed).ok()) continue;
      e.diagnostic = PrepDiagnosticOf(found.status());
      LogError("a ready generation's Runtime files changed; it is refused and kept as found",
               {{"generation", h->generation},
                {"diagnostic", DiagnosticCode(*e.diagnostic)},
                {"error", std::string(found.status().message())}});
      continue;
    }
    if (!Move(h->generation, e, Phase::kNeedsRepair).ok()) continue;
    e.diagnostic = **found;
    LogWarning("a ready generation lacks Runtime bytes or an image; it needs repair",
               {{"generation", h->generation}, {"diagnostic", DiagnosticCode(**found)}});
  }
}

void GenerationStore::ProviderProbePassed() {
  absl::MutexLock lock(&mu_);
  probe_passed_ = true;
  for (auto& [g, e] : entries_) {
    if (e.phase() != Phase::kReadyAwaitingProbe || !Move(g, e, Phase::kReady).ok()) continue;
    LogInfo("the provider's probe passed: a generation adopted at start is ready",
            {{"generation", g}, {"specification_digest", e.digest}});
  }
}

absl::StatusOr<GenerationStore::RepairLocks> GenerationStore::LockForRepair(
    int64_t g, const std::string& digest) {
  RepairLocks locks;
  absl::StatusOr<std::unique_ptr<FileLock>> installation = LockInstallation(fs_, node_, owner_);
  if (absl::IsUnavailable(installation.status())) {
    return PrepFailure(absl::StatusCode::kUnavailable, Diagnostic::kProviderUnavailable,
                       "the installation lock is held (a collection or repair runs); retry later");
  }
  RETURN_IF_ERROR(installation.status());
  locks.installation = *std::move(installation);
  absl::StatusOr<std::unique_ptr<FileLock>> lease =
      OpenLease(fs_, dir_, owner_, g, installation_id_, digest, LockMode::kExclusive);
  if (absl::IsUnavailable(lease.status())) {
    return PrepFailure(absl::StatusCode::kUnavailable, Diagnostic::kProviderUnavailable,
                       absl::StrCat("a native helper or collector holds generation ", g,
                                    "'s lease; retry later"));
  }
  RETURN_IF_ERROR(lease.status());
  locks.lease = *std::move(lease);
  return locks;
}

absl::StatusOr<std::vector<std::string>> GenerationStore::BeginRepair(
    int64_t g, std::string_view specification, wire::SpecificationDocument spec) {
  std::shared_ptr<const HeldGeneration> held = Find(g);
  if (held == nullptr) return Refused(Diagnostic::kConfigurationInvalid, "not held");
  absl::Status s = [&]() -> absl::Status {
    // The recorded specification, exactly: a different retained one refuses.
    ASSIGN_OR_RETURN(std::string recorded,
                     ReadPrivateRecord(fs_, dir_, SpecificationRecordName(g),
                                       wire::kMaxHttpBodyBytes, owner_));
    if (recorded != specification) {
      return Refused(Diagnostic::kConfigurationInvalid,
                     "another specification of this generation is recorded");
    }
    if (spec.runtime_source != held->source) {
      return Refused(Diagnostic::kConfigurationInvalid,
                     "the specification names another release than the final configuration");
    }
    return absl::OkStatus();
  }();
  if (!s.ok()) return s;
  // The selected release, verified again with privhelper's key.
  absl::StatusOr<release::VerifiedRelease> rel = releases_->Load(held->source);
  if (absl::IsNotFound(rel.status())) {
    return Refused(Diagnostic::kConfigurationInvalid, "the release was not adopted first");
  }
  if (!rel.ok()) return rel.status();
  if (absl::Status agrees = release::CheckSpecificationAgainstManifest(spec, rel->manifest());
      !agrees.ok()) {
    return Refused(Diagnostic::kConfigurationInvalid, std::string(agrees.message()));
  }
  ASSIGN_OR_RETURN(RepairLocks locks, LockForRepair(g, held->specification_digest));
  // Every existing sibling verified; only missing files are taken.
  absl::StatusOr<std::vector<std::string>> missing = MissingArtifacts(*held, true);
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[g];
  // A Finish that started meanwhile (kRepairFinishing) decides; only a repair not finishing
  // is begun (again).
  if ((e.phase() != Phase::kNeedsRepair && e.phase() != Phase::kRepairBegun) || e.held != held) {
    return absl::UnavailableError("the generation changed during the repair's checks");
  }
  if (!missing.ok()) {
    if (IsRefusal(missing.status()) && Move(g, e, Phase::kFailed).ok()) {
      e.diagnostic = PrepDiagnosticOf(missing.status());
      e.repair_missing.reset();
      LogError("repair refused: a stored Runtime file conflicts; nothing is repaired",
               {{"generation", g}, {"error", std::string(missing.status().message())}});
    }
    return missing.status();
  }
  Plan plan;
  plan.installation_id = installation_id_;
  plan.generation = g;
  plan.specification_digest = held->specification_digest;
  plan.source = held->source;
  plan.artifacts = held->artifacts;
  plan.import_started = true;
  RETURN_IF_ERROR(Move(g, e, Phase::kRepairBegun));
  e.plan = std::move(plan);
  e.spec = std::move(spec);
  e.repair_missing = std::set<std::string>(missing->begin(), missing->end());
  LogInfo("repair begun", {{"generation", g},
                           {"missing_artifacts", static_cast<uint64_t>(missing->size())}});
  return missing;
}

absl::Status GenerationStore::FinishRepair(int64_t g, ImageImporter& importer,
                                           const std::function<absl::Status()>& provider_ready) {
  std::shared_ptr<const HeldGeneration> held = Find(g);
  absl::Status s = [&]() -> absl::Status {
    if (held == nullptr) return Refused(Diagnostic::kConfigurationInvalid, "not held");
    ASSIGN_OR_RETURN(RepairLocks locks, LockForRepair(g, held->specification_digest));
    ASSIGN_OR_RETURN(std::vector<std::string> missing, MissingArtifacts(*held, true));
    if (!missing.empty()) {
      return release::TransferFailure(absl::StrCat("artifact ", missing.front(),
                                                   " was not stored"));
    }
    // A recorded image is re-imported only as the one its stored archive produces (every
    // archive was just verified against its checksum, so a record of that holds).
    RETURN_IF_ERROR(VerifyImagesDerived(*held, importer));
    for (const HeldImage& image : held->images) {
      const PlannedArtifact* archive = nullptr;
      for (const PlannedArtifact& a : held->artifacts) {
        if (a.name == image.artifact) archive = &a;
      }
      if (archive == nullptr) {
        return Refused(Diagnostic::kConfigurationInvalid,
                       "an image names no artifact of the final configuration");
      }
      absl::StatusOr<std::string> native = importer.Resolve(image.native_image);
      if (native.ok()) continue;
      if (!absl::IsNotFound(native.status())) return native.status();
      ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> file,
                       releases_->OpenArtifact(held->source, archive->name));
      LogInfo("re-importing an image from its stored archive",
              {{"generation", g}, {"artifact", archive->name}, {"bytes", archive->size}});
      RETURN_IF_ERROR(importer.Load([&file](char* buf, size_t n) { return file->Read(buf, n); },
                                    static_cast<uint64_t>(archive->size)));
      native = importer.Resolve(image.native_image);
      if (absl::IsNotFound(native.status())) {
        return Refused(Diagnostic::kConfigurationInvalid,
                       "the stored archive does not hold the recorded native image");
      }
      RETURN_IF_ERROR(native.status());
    }
    // File presence and a loaded image never establish readiness: the provider's probe does.
    if (!provider_ready) {
      return PrepFailure(absl::StatusCode::kUnavailable, Diagnostic::kProviderUnavailable,
                         "no readiness probe");
    }
    return provider_ready();
  }();
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[g];
  // A collection that took it meanwhile decides (it gives it back kRepairBegun, if at all).
  if (e.phase() != Phase::kRepairFinishing || e.held != held) return s;
  if (!s.ok()) {
    if (IsRefusal(s)) {
      Move(g, e, Phase::kFailed).IgnoreError();  // listed: kRepairFinishing → kFailed
      e.diagnostic = PrepDiagnosticOf(s);
    } else {
      Move(g, e, Phase::kNeedsRepair).IgnoreError();  // listed: kRepairFinishing → kNeedsRepair
    }
    LogWarning("repair did not finish", {{"generation", g}, {"error", s.ToString()}});
  } else {
    // kReady, not kReadyAwaitingProbe: provider_ready() just passed.
    Move(g, e, Phase::kReady).IgnoreError();  // listed: kRepairFinishing → kReady
    e.diagnostic.reset();
    LogInfo("generation repaired and ready", {{"generation", g},
                                              {"specification_digest", e.digest}});
  }
  e.plan.reset();
  e.spec.reset();
  e.repair_missing.reset();
  return s;
}

}  // namespace sn::privhelper::store

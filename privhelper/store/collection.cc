// GenerationStore's collection half (docs/architecture.md, "A generation's lifecycle";
// docs/formats.md for the journal and the dropped marker and their fsync order).
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/lease.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper::store {
namespace {

constexpr size_t kMaxIdentityBytes = 4096;

absl::Status Refused(Diagnostic d, std::string_view why) {
  return PrepFailure(absl::StatusCode::kFailedPrecondition, d, why);
}

wire::RuntimeArtifact AsRuntime(const PlannedArtifact& a) {
  return wire::RuntimeArtifact{a.name, a.kind, a.sha256, a.size};
}

}  // namespace

absl::StatusOr<std::set<std::string>> GenerationStore::RetainedPaths(int64_t except) {
  std::vector<int64_t> others;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [g, e] : entries_) {
      if (g != except && e.phase() != Phase::kDropped) others.push_back(g);
    }
  }
  std::set<std::string> paths;
  for (int64_t g : others) {
    bool import_started = false;
    std::string source;
    ASSIGN_OR_RETURN(std::vector<PlannedArtifact> artifacts,
                     RecordedArtifacts(g, &import_started, &source));
    for (const PlannedArtifact& a : artifacts) paths.insert(a.path);
  }
  return paths;
}

absl::StatusOr<CollectionJournal> GenerationStore::NewJournal(int64_t g, const std::string& digest) {
  CollectionJournal j;
  j.installation_id = installation_id_;
  j.generation = g;
  j.specification_digest = digest;
  bool import_started = false;
  ASSIGN_OR_RETURN(std::vector<PlannedArtifact> artifacts,
                   RecordedArtifacts(g, &import_started, &j.source));
  j.import_started = import_started;
  if (j.source.empty()) {
    // Nothing recorded names a release (a lease or specification alone): no file to remove.
    if (!artifacts.empty()) return absl::InternalError("artifacts without a source");
    return j;
  }
  ASSIGN_OR_RETURN(std::set<std::string> retained, RetainedPaths(g));
  for (const PlannedArtifact& a : artifacts) {
    if (retained.count(a.path) > 0) continue;  // another retained configuration needs it
    absl::Status stored = releases_->Check(j.source, AsRuntime(a));
    if (absl::IsNotFound(stored)) {
      if (import_started) {
        return Refused(Diagnostic::kOwnershipRefused,
                       absl::StrCat("artifact ", a.name, " is missing and the generation's "
                                    "import may have started: missing files never prove "
                                    "native absence, so it stays retained"));
      }
      continue;  // never stored: nothing to remove
    }
    // Changed bytes, links or ownership refuse the whole collection before any deletion.
    RETURN_IF_ERROR(stored);
    j.files.push_back(a);
  }
  // Every other file of the release directory too, before anything is recorded or removed.
  RETURN_IF_ERROR(releases_->CheckEveryFile(j.source));
  return j;
}

absl::Status GenerationStore::MarkerDurable(int64_t g, const std::string& digest) {
  ASSIGN_OR_RETURN(std::string text,
                   ReadPrivateRecord(fs_, dir_, DroppedMarkerName(g), kMaxJournalBytes, owner_));
  absl::StatusOr<DroppedMarker> m = DecodeDroppedMarker(text);
  if (!m.ok() || !(*m == DroppedMarker{installation_id_, g, digest})) {
    return Refused(Diagnostic::kConfigurationInvalid, "another dropped marker is recorded");
  }
  return fs_.SyncDir(dir_);
}

absl::Status GenerationStore::ReclaimDropped(int64_t g, bool marker_synced) {
  std::vector<std::string> left;
  for (const std::string& name : RecordsReclaimedWhenDropped(g)) {
    if (fs_.StatAt(dir_, name).ok()) left.push_back(name);
  }
  if (!marker_synced) {
    if (left.empty()) return absl::OkStatus();
    // The marker may be in place without being durable yet (a kill -9 after its rename): never
    // remove a record of a generation that is not durably dropped.
    RETURN_IF_ERROR(fs_.SyncDir(dir_));
  }
  for (const std::string& name : left) {
    absl::Status removed = fs_.UnlinkAt(dir_, name);
    if (!removed.ok() && !absl::IsNotFound(removed)) return removed;
  }
  return fs_.SyncDir(dir_);
}

absl::Status GenerationStore::Collect(int64_t g, std::string_view digest,
                                      const CollectHooks& hooks) {
  Phase before;
  std::optional<Plan> plan_before;
  std::optional<wire::SpecificationDocument> spec_before;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(g);
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("privhelper records no generation ", g));
    }
    Entry& e = it->second;
    if (e.digest != digest) {
      return Refused(Diagnostic::kConfigurationInvalid,
                     "the generation is recorded with another specification digest");
    }
    if (e.phase() == Phase::kDropped) return absl::OkStatus();
    if (e.phase() == Phase::kFailed) {
      return Refused(*e.diagnostic,
                     "its records refuse adoption; they are kept for inspection, never collected");
    }
    if (collecting_) return absl::UnavailableError("another collection is running");
    collecting_ = true;
    before = e.phase();
    plan_before = e.plan;
    spec_before = e.spec;
  }
  if (hooks.admitted) hooks.admitted();
  bool journal_recorded = false;
  absl::Status s = CollectLocked(g, std::string(digest), hooks, &journal_recorded);
  absl::MutexLock lock(&mu_);
  collecting_ = false;
  Entry& e = entries_[g];
  if (s.ok()) {
    // Only its digest stays in memory (as after a start): no plan, specification, final
    // configuration or journal of a generation that is never used again.
    Entry dropped;
    dropped.life = e.life;
    RETURN_IF_ERROR(Move(g, dropped, Phase::kDropped));
    dropped.digest = std::move(e.digest);
    e = std::move(dropped);
    LogInfo("generation dropped", {{"generation", g}, {"specification_digest", e.digest}});
    return s;
  }
  e.last_collection_error = std::string(s.message());
  // Nothing changed on disk until a journal was recorded: the generation is as it was. Once
  // one is on disk (even if its directory fsync failed) the generation stays COLLECTING, as the
  // next start would find it (finding E).
  if (!journal_recorded && e.phase() == Phase::kCollecting && before != Phase::kCollecting) {
    // Given back as it was taken, but a repair's Finish that ran meanwhile has ended (it found
    // the generation collecting), and a probe that passed meanwhile counts.
    Phase back = before;
    if (back == Phase::kRepairFinishing) back = Phase::kRepairBegun;
    if (back == Phase::kReadyAwaitingProbe && probe_passed_) back = Phase::kReady;
    if (Move(g, e, back).ok()) {
      e.plan = std::move(plan_before);
      e.spec = std::move(spec_before);
    }
  }
  LogWarning("collection did not finish",
             {{"generation", g}, {"journal_recorded", journal_recorded}, {"error", s.ToString()}});
  return s;
}

absl::Status GenerationStore::CollectLocked(int64_t g, const std::string& digest,
                                            const CollectHooks& hooks, bool* journal_recorded) {
  ASSIGN_OR_RETURN(std::unique_ptr<FileLock> installation, LockInstallation(fs_, node_, owner_));
  std::unique_ptr<FileLock> lease;
  if (fs_.StatAt(dir_, LeaseName(g)).ok()) {
    absl::StatusOr<std::unique_ptr<FileLock>> l =
        OpenLease(fs_, dir_, owner_, g, installation_id_, digest, LockMode::kExclusive);
    if (absl::IsUnavailable(l.status())) {
      return absl::UnavailableError(
          absl::StrCat("a native helper holds generation ", g, "'s lease"));
    }
    RETURN_IF_ERROR(l.status());
    lease = *std::move(l);
  }
  // Under both locks nothing new can start on the generation; the caller's references now.
  RETURN_IF_ERROR(hooks.unreferenced());
  {
    absl::MutexLock lock(&mu_);
    Entry& e = entries_[g];
    RETURN_IF_ERROR(Move(g, e, Phase::kCollecting));  // Find() no longer returns it
    e.plan.reset();
    e.spec.reset();
  }
  // A marker an earlier attempt of this process put in place (it failed after): every step
  // before it succeeded, so only its durability and what follows it are left. (A marker found
  // at start made the generation DROPPED, and Collect answered before this.)
  if (fs_.StatAt(dir_, DroppedMarkerName(g)).ok()) {
    *journal_recorded = true;  // it stays COLLECTING in this process until this finishes
    RETURN_IF_ERROR(MarkerDurable(g, digest));
    return ReclaimDropped(g, /*marker_synced=*/true);
  }
  CollectionJournal journal;
  absl::StatusOr<std::string> recorded =
      ReadPrivateRecord(fs_, dir_, CollectionJournalName(g), kMaxJournalBytes, owner_);
  if (recorded.ok()) {
    *journal_recorded = true;
    absl::StatusOr<CollectionJournal> j = DecodeCollectionJournal(*recorded);
    if (!j.ok() || j->installation_id != installation_id_ || j->generation != g ||
        j->specification_digest != digest) {
      return Refused(Diagnostic::kConfigurationInvalid,
                     "the collection journal is torn or binds another generation");
    }
    journal = *std::move(j);
    // An earlier attempt in this process may have renamed it into place and then failed its
    // directory fsync: make what was read durable before acting on it, or a power loss could
    // take back native_done after release files were removed (finding F).
    RETURN_IF_ERROR(fs_.SyncDir(dir_));
  } else if (absl::IsNotFound(recorded.status())) {
    ASSIGN_OR_RETURN(journal, NewJournal(g, digest));
    absl::Status published =
        PublishOnce(fs_, dir_, CollectionJournalName(g), EncodeCollectionJournal(journal));
    // A failed directory fsync leaves the journal in place: it counts from now on (finding E).
    if (published.ok() || fs_.StatAt(dir_, CollectionJournalName(g)).ok()) {
      *journal_recorded = true;
    }
    RETURN_IF_ERROR(published);
  } else {
    return Refused(Diagnostic::kOwnershipRefused, std::string(recorded.status().message()));
  }
  {
    absl::MutexLock lock(&mu_);
    entries_[g].journal = journal;
  }
  if (!journal.native_done) {
    ASSIGN_OR_RETURN(std::vector<std::string> unshared, UnsharedNativeImages(g));
    RETURN_IF_ERROR(hooks.native_cleanup(unshared, journal.files));
    journal.native_done = true;
    RETURN_IF_ERROR(PublishReplacing(fs_, dir_, CollectionJournalName(g),
                                     EncodeCollectionJournal(journal)));
    absl::MutexLock lock(&mu_);
    entries_[g].journal = journal;
  }
  // Shared paths again, now: a generation prepared since the journal was written keeps its files.
  ASSIGN_OR_RETURN(std::set<std::string> retained, RetainedPaths(g));
  // Before the first deletion (of this attempt): every remaining file of the release
  // directory is known to its verified manifest and exact, or nothing is removed.
  if (!journal.source.empty()) RETURN_IF_ERROR(releases_->CheckEveryFile(journal.source));
  for (const PlannedArtifact& f : journal.files) {
    if (retained.count(f.path) > 0) {
      LogInfo("a file the journal lists is referenced again; kept",
              {{"generation", g}, {"path", f.path}});
      continue;
    }
    absl::Status removed = releases_->Remove(journal.source, AsRuntime(f));
    if (absl::IsNotFound(removed)) continue;  // removed by an earlier attempt
    RETURN_IF_ERROR(removed);
  }
  if (!journal.source.empty()) RETURN_IF_ERROR(releases_->SyncSource(journal.source));
  const DroppedMarker marker{installation_id_, g, digest};
  absl::Status published = PublishOnce(fs_, dir_, DroppedMarkerName(g), EncodeDroppedMarker(marker));
  if (absl::IsAlreadyExists(published)) {
    RETURN_IF_ERROR(MarkerDurable(g, digest));
  } else {
    RETURN_IF_ERROR(published);
  }
  // The marker and its directory entry are durable: the generation is dropped for good, and
  // its journal, specification, plan and images record go: a dropped generation
  // keeps only its marker and identity records, so junk generations cost one small file each.
  return ReclaimDropped(g, /*marker_synced=*/true);
}

std::vector<GenerationDetail> GenerationStore::Details() const {
  struct Item {
    GenerationStatus status;
    std::optional<Plan> plan;
    std::optional<CollectionJournal> journal;
    std::string error;
  };
  std::vector<Item> items;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [g, e] : entries_) {
      items.push_back({{g, e.digest, e.state(), e.diagnostic}, e.plan, e.journal,
                       e.last_collection_error});
    }
  }
  std::vector<GenerationDetail> out;
  for (Item& item : items) {
    GenerationDetail d;
    d.status = item.status;
    d.last_collection_error = item.error;
    const int64_t g = item.status.generation;
    std::optional<Plan> plan = item.plan;
    if (!plan.has_value() && item.status.state == GenerationState::kPreparing) {
      absl::StatusOr<std::string> text = ReadPrivateRecord(
          fs_, dir_, PlanName(g), kMaxJournalBytes, owner_);
      if (text.ok()) {
        absl::StatusOr<Plan> p = DecodePlan(*text);
        if (p.ok()) plan = *std::move(p);
      }
    }
    if (plan.has_value() && item.status.state == GenerationState::kPreparing) {
      GenerationDetail::Progress p;
      p.import_started = plan->import_started;
      p.artifacts_total = static_cast<int>(plan->artifacts.size());
      for (const PlannedArtifact& a : plan->artifacts) {
        p.bytes_total += a.size;
        absl::StatusOr<uint64_t> size = releases_->StoredSize(plan->source, a.name);
        if (size.ok() && *size == static_cast<uint64_t>(a.size)) {
          ++p.artifacts_stored;
          p.bytes_stored += a.size;
        }
      }
      d.progress = p;
    }
    if (item.journal.has_value()) {
      d.native_done = item.journal->native_done;
      for (const PlannedArtifact& f : item.journal->files) {
        if (releases_->StoredSize(item.journal->source, f.name).ok()) ++d.collect_files_left;
      }
    }
    absl::StatusOr<std::string> identity = ReadPrivateRecord(
        fs_, dir_, LeaseIdentityName(g), kMaxIdentityBytes, owner_);
    if (identity.ok()) {
      absl::StatusOr<LeaseIdentity> id = DecodeLeaseIdentity(*identity);
      if (id.ok()) d.lease_dev_ino = std::make_pair(id->device, id->inode);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace sn::privhelper::store

// A generation store's start: the record names, the listing of node/generations/ and the
// classification of every generation it finds (GenerationStore::Open, Classify).
#include <charconv>
#include <set>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/wire/limits.h"
#include "privhelper/store/collection_records.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/final_config.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/lease.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper::store {
namespace {


// A durable record of one generation as a start reads it: `refused` when it is unreadable or
// not privhelper's own (ownership_refused), or undecodable or another generation's or
// installation's (configuration_invalid); else `record`, empty when there is none.
template <typename T>
struct StartRecord {
  std::optional<T> record;
  std::optional<Diagnostic> refused;
};

template <typename Decode,
          typename T = typename std::invoke_result_t<Decode, std::string_view>::value_type>
StartRecord<T> ReadStartRecord(Fs& fs, const Dir& dir, uint32_t owner,
                               const std::string& installation_id, int64_t g,
                               std::string_view name, size_t max_bytes, Decode decode) {
  StartRecord<T> out;
  absl::StatusOr<std::string> text = ReadPrivateRecord(fs, dir, name, max_bytes, owner);
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) out.refused = Diagnostic::kOwnershipRefused;
    return out;
  }
  absl::StatusOr<T> r = decode(*text);
  if (!r.ok() || r->generation != g || r->installation_id != installation_id) {
    out.refused = Diagnostic::kConfigurationInvalid;
    return out;
  }
  out.record = *std::move(r);
  return out;
}

// The generation whose record, lease or collection file `name` is (each name as its own
// function spells it: "<g>.json", "<g>.preparing", "<g>.lease", "<g>.collecting",
// "<g>.dropped"), or 0. Only these names make a start look at a generation.
int64_t GenerationNamed(std::string_view name) {
  int64_t g = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), g);
  if (ec != std::errc() || g <= 0) return 0;
  for (const std::string& own : {FinalConfigurationName(g), PlanName(g), LeaseName(g),
                                 CollectionJournalName(g), DroppedMarkerName(g)}) {
    if (own == name) return g;
  }
  return 0;
}

}  // namespace

std::string SpecificationRecordName(int64_t generation) {
  return absl::StrCat(generation, ".specification");
}
std::string PlanName(int64_t generation) { return absl::StrCat(generation, ".preparing"); }
std::string ImagesDerivedName(int64_t generation) { return absl::StrCat(generation, ".images"); }
std::string FinalConfigurationName(int64_t generation) {
  return absl::StrCat(generation, ".json");
}
std::vector<std::string> RecordsReclaimedWhenDropped(int64_t generation) {
  return {CollectionJournalName(generation), SpecificationRecordName(generation),
          PlanName(generation), ImagesDerivedName(generation)};
}

absl::StatusOr<std::unique_ptr<GenerationStore>> GenerationStore::Open(
    Fs& fs, const Dir& state, uint32_t owner, std::string installation_id, std::string provider,
    ReleaseStore* releases) {
  ASSIGN_OR_RETURN(Dir node, OpenPrivateSubdir(fs, state, "node", owner));
  ASSIGN_OR_RETURN(Dir dir, OpenPrivateSubdir(fs, node, "generations", owner));
  RETURN_IF_ERROR(RemoveStrayTemporaries(fs, dir));
  std::unique_ptr<GenerationStore> store(new GenerationStore(fs, std::move(node), std::move(dir), owner,
                                                            std::move(installation_id),
                                                            std::move(provider), releases));
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(store->dir_));
  std::set<int64_t> generations;
  for (const std::string& n : names) {
    if (int64_t g = GenerationNamed(n); g > 0) generations.insert(g);
  }
  for (int64_t g : generations) {
    Entry e = store->Classify(g);
    if (e.phase() == Phase::kFailed) {
      LogError("a generation's records refuse adoption; they are kept for inspection",
               {{"generation", g}, {"diagnostic", DiagnosticCode(*e.diagnostic)}});
    }
    absl::MutexLock lock(&store->mu_);
    store->entries_[g] = std::move(e);
  }
  return store;
}

absl::StatusOr<std::shared_ptr<const HeldGeneration>> GenerationStore::LoadFinal(int64_t g) {
  ASSIGN_OR_RETURN(std::string text, ReadPrivateRecord(fs_, dir_, FinalConfigurationName(g),
                                                       kMaxFinalBytes, owner_));
  ASSIGN_OR_RETURN(HeldGeneration h, DecodeFinal(text, installation_id_, provider_));
  if (h.generation != g) return absl::FailedPreconditionError("it names another generation");
  ASSIGN_OR_RETURN(std::string spec, ReadPrivateRecord(fs_, dir_, SpecificationRecordName(g),
                                                       wire::kMaxHttpBodyBytes, owner_));
  if (Sha256Hex(spec) != h.specification_digest) {
    return absl::FailedPreconditionError("its specification no longer hashes to its digest");
  }
  return std::make_shared<const HeldGeneration>(std::move(h));
}

// Every start adopts from kAbsent (lifecycle.cc lists each of these transitions).
GenerationStore::Entry GenerationStore::Classify(int64_t g) {
  Entry e;
  auto adopt = [&e, g](Phase to) {
    Move(g, e, to).IgnoreError();  // from kAbsent: listed for every phase adopted here
    return e;
  };
  auto fail = [&e, &adopt](Diagnostic d) {
    e.diagnostic = d;
    return adopt(Phase::kFailed);
  };
  auto read = [this, g](std::string_view name, size_t max_bytes, auto decode) {
    return ReadStartRecord(fs_, dir_, owner_, installation_id_, g, name, max_bytes, decode);
  };
  // Dropped: the marker is durable, so what a collection interrupted after it left (a journal,
  // the specification, the plan, the images record) is only removed.
  auto dropped = read(DroppedMarkerName(g), kMaxJournalBytes, DecodeDroppedMarker);
  if (dropped.refused) return fail(*dropped.refused);
  if (dropped.record) {
    if (!ReclaimDropped(g, /*marker_synced=*/false).ok()) {
      return fail(Diagnostic::kStorageExhausted);
    }
    e.digest = dropped.record->specification_digest;
    return adopt(Phase::kDropped);
  }
  // An unfinished collection: never usable again; only a new Collect finishes it.
  auto journal = read(CollectionJournalName(g), kMaxJournalBytes, DecodeCollectionJournal);
  if (journal.refused) return fail(*journal.refused);
  if (journal.record) {
    e.digest = journal.record->specification_digest;
    e.journal = *std::move(journal.record);
    return adopt(Phase::kCollecting);
  }
  auto planned = read(PlanName(g), kMaxPlanBytes, DecodePlan);
  if (planned.refused) return fail(*planned.refused);
  std::optional<Plan> plan = std::move(planned.record);
  if (plan) e.digest = plan->specification_digest;
  const bool has_final = fs_.StatAt(dir_, FinalConfigurationName(g)).ok();
  if (!has_final) {
    if (!plan.has_value()) return fail(Diagnostic::kOwnershipRefused);  // a lease alone
    // A lease whose identity never became durable refuses adoption; a complete one (a crash
    // after the identity, before the final configuration) is finished by the next Finish.
    if (fs_.StatAt(dir_, LeaseName(g)).ok()) {
      absl::StatusOr<std::unique_ptr<FileLock>> lease =
          OpenLease(fs_, dir_, owner_, g, installation_id_, e.digest, LockMode::kShared);
      if (!lease.ok() && !absl::IsUnavailable(lease.status())) {
        return fail(PrepDiagnosticOf(lease.status()));
      }
    }
    e.plan = std::move(plan);
    return adopt(Phase::kPreparing);
  }
  absl::StatusOr<std::shared_ptr<const HeldGeneration>> held = LoadFinal(g);
  if (!held.ok()) return fail(Diagnostic::kConfigurationInvalid);
  e.digest = (*held)->specification_digest;
  absl::StatusOr<std::unique_ptr<FileLock>> lease =
      OpenLease(fs_, dir_, owner_, g, installation_id_, e.digest, LockMode::kShared);
  if (!lease.ok() && !absl::IsUnavailable(lease.status())) {
    return fail(PrepDiagnosticOf(lease.status()));
  }
  if (plan.has_value()) {
    // Interrupted between publishing the final configuration and clearing the plan: the same
    // plan is cleared, a drifted one refuses.
    const HeldGeneration& h = **held;
    if (plan->specification_digest != h.specification_digest || plan->source != h.source ||
        plan->artifacts != h.artifacts) {
      return fail(Diagnostic::kConfigurationInvalid);
    }
    if (!fs_.UnlinkAt(dir_, PlanName(g)).ok() || !fs_.SyncDir(dir_).ok()) {
      return fail(Diagnostic::kStorageExhausted);
    }
  }
  e.held = *std::move(held);
  // Ready for use only once the provider's probe passed (docs/protocol.md 20a).
  return adopt(Phase::kReadyAwaitingProbe);
}

}  // namespace sn::privhelper::store

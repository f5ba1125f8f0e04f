// The generations privhelper holds, and everything native about them, from state privhelper
// owns (never from the agent): the records in <state_dir>/node/generations/ (<g>.specification,
// .preparing, .lease, .lease-identity, .images, .json, .collecting, .dropped: docs/formats.md,
// each with its fsync order) and the artifacts in the release store (release_store.h).
//
// Each generation is one Lifecycle (lifecycle.h): its phases and the only transitions between
// them, each with the durable step that makes it, are one table, printed and explained in
// docs/architecture.md ("A generation's lifecycle"). The steps that drive it:
//   generations.cc   start (Classify), preparation: Begin, WriteArtifact, Finish (Publish)
//   repair.cc        Recheck (start and every probe), ProviderProbePassed, a repair's steps
//   collection.cc    Collect, Details
//   generations_overlap.cc  which upload gets an overlapped image load (overlapped_load.h)
// A plan found at start-up is only reported: acting on it (Finish) needs a Begin on the
// current connection first. Preparation is serialized by the server (one at a time).
//
// Thread-safe.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_GENERATIONS_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_GENERATIONS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/diagnostics.h"
#include "common/wire/http_bodies.h"
#include "privhelper/importer.h"
#include "privhelper/store/collection_records.h"
#include "privhelper/store/final_config.h"
#include "privhelper/store/fs.h"
#include "privhelper/store/lifecycle.h"
#include "privhelper/store/plan.h"
#include "privhelper/store/release_store.h"

namespace sn::privhelper::store {

class OverlappedLoad;  // overlapped_load.h

struct GenerationStatus {
  int64_t generation = 0;
  std::string specification_digest;
  GenerationState state = GenerationState::kPreparing;
  std::optional<Diagnostic> diagnostic;  // with kFailed; with kNeedsRepair what is missing
};

// What an operator reads about a generation (ListGenerations), from records and stat() alone:
// nothing is locked or checksummed to produce it.
struct GenerationDetail {
  GenerationStatus status;
  // PREPARING: the plan's artifacts already in the store (complete files) of all it names.
  struct Progress {
    int artifacts_stored = 0;
    int artifacts_total = 0;
    int64_t bytes_stored = 0;
    int64_t bytes_total = 0;
    bool import_started = false;
  };
  std::optional<Progress> progress;
  // The lease file as its identity record names it (to find its holders in /proc/locks).
  std::optional<std::pair<uint64_t, uint64_t>> lease_dev_ino;
  // COLLECTING: files the journal still has to remove, and whether native cleanup finished.
  int collect_files_left = 0;
  bool native_done = false;
  // Why a collection was last refused or left unfinished in this process ("" if none).
  std::string last_collection_error;
};

// What collection asks of privhelper outside the store; both run with the installation lock
// and the generation's lease held exclusively.
struct CollectHooks {
  // Runs once the records admit this collection (the generation is recorded with this digest,
  // neither dropped nor failed, and no other collection runs), before any lock is taken or
  // file touched: the place of the request's side effects on what privhelper runs (stopping
  // the generation's idle helper), so that a request refused by a check has none.
  std::function<void()> admitted;
  // OK when nothing privhelper runs references the generation and the caller is still there;
  // Unavailable naming the reference otherwise (a call in flight, a helper not yet reaped).
  std::function<absl::Status()> unreferenced;
  // The backend's cleanup of the generation's native images (Docker: nothing; images belong
  // to the host's shared daemon and are never removed or pruned) and of its own copies of the
  // release files this collection removes (`files`, the journal's).
  std::function<absl::Status(const std::vector<std::string>& native_images,
                             const std::vector<PlannedArtifact>& files)>
      native_cleanup;
};

// Bounds of the records a liar could make privhelper keep (Core keeps every pair it does not
// know, so junk generations begun by one are never dropped; only a cap bounds them): a
// BeginPreparation of a generation privhelper does not record yet is refused
// storage_exhausted while it holds max_generations records (dropped generations excluded:
// their markers stay for good, a few hundred bytes each) or while kMaxPreparingGenerations are
// preparing. A generation it records already (resumed, repaired, READY) is never refused by
// these.
inline constexpr int64_t kDefaultMaxGenerationRecords = 64;
inline constexpr int kMaxPreparingGenerations = 2;
// The largest preparation plan and collection journal (or dropped marker) a start reads.
inline constexpr size_t kMaxPlanBytes = 256 * 1024;
inline constexpr size_t kMaxJournalBytes = 256 * 1024;

class GenerationStore {
 public:
  // Opens (creating) node/generations/ under `state` and classifies every generation it
  // records (docs/architecture.md, "A generation's lifecycle"). Only an unreadable directory stops the start.
  static absl::StatusOr<std::unique_ptr<GenerationStore>> Open(Fs& fs, const Dir& state,
                                                               uint32_t owner,
                                                               std::string installation_id,
                                                               std::string provider,
                                                               ReleaseStore* releases);

  std::vector<GenerationStatus> Statuses() const ABSL_LOCKS_EXCLUDED(mu_);
  // The held generation (READY or NEEDS_REPAIR), or nullptr.
  std::shared_ptr<const HeldGeneration> Find(int64_t generation) const ABSL_LOCKS_EXCLUDED(mu_);
  // READY: held and nothing found missing (create and a full resume need it), and, for a
  // generation adopted READY at this start, a provider probe passed since
  // (ProviderProbePassed; docs/protocol.md 20a).
  bool Ready(int64_t generation) const ABSL_LOCKS_EXCLUDED(mu_);
  bool empty() const ABSL_LOCKS_EXCLUDED(mu_);  // no held generation
  // privhelper's configured max_generations (config.h); kDefaultMaxGenerationRecords until set.
  void SetMaxGenerations(int64_t n) ABSL_LOCKS_EXCLUDED(mu_);

  // Detection (docs/architecture.md, "A generation's lifecycle"): every READY generation's Runtime files (their bytes
  // too when `verify_bytes`) and recorded native images. A missing file or image makes it
  // NEEDS_REPAIR, other bytes, links or ownership FAILED. Skips a generation whose repair or
  // collection is running; images only when `importer` is given (a reachable backend).
  void Recheck(ImageImporter* importer, bool verify_bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // The provider's readiness probe passed (privhelper's Probe, after its Recheck): every
  // generation adopted READY at this start may be used for create and a full resume. Until
  // then Ready() is false for them, whatever their files say: a start after a crash between a
  // repair's stored bytes and its probe is no different from any other start.
  void ProviderProbePassed() ABSL_LOCKS_EXCLUDED(mu_);

  // Preparation steps (docs/architecture.md, "A generation's lifecycle"). Failures carry their diagnostic
  // (prep_failure.h). Begin returns the artifacts still to store.
  absl::StatusOr<std::vector<std::string>> Begin(int64_t generation,
                                                 std::string_view specification,
                                                 std::string_view digest)
      ABSL_LOCKS_EXCLUDED(mu_);
  // After Begin: of the artifacts it returned (`missing`), those of which a partial is held,
  // with its size; the partials of the plan's other (stored) artifacts are discarded.
  absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> HeldPartials(
      int64_t generation, const std::vector<std::string>& missing) ABSL_LOCKS_EXCLUDED(mu_);
  // `offset`: ReleaseStore::Write (0, or exactly the partial's size). With `overlap` (the
  // backend's image store), the generation's image archive is loaded while it streams
  // (overlapped_load.h); a load that cannot start only logs its reason and the file is stored
  // as without, but a plan that cannot be made durable fails the upload.
  absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> WriteArtifact(
      int64_t generation, std::string_view name, uint64_t offset = 0,
      ImageImporter* overlap = nullptr) ABSL_LOCKS_EXCLUDED(mu_, overlap_mu_);
  // `provider_ready` is the provider's readiness probe: a repair ends READY only when it
  // passes (empty: a repair is refused as provider_unavailable).
  absl::Status Finish(int64_t generation, ImageImporter& importer,
                      const std::function<absl::Status()>& provider_ready = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_, overlap_mu_);
  // Cuts an overlapped load still running and joins its thread (before the image store it
  // uses goes away).
  void StopOverlappedLoad() ABSL_LOCKS_EXCLUDED(overlap_mu_);
  ~GenerationStore();

  // Collects a generation (docs/architecture.md, "A generation's lifecycle"). OK when it is dropped (now or before);
  // NotFound for a generation privhelper does not record; Unavailable when something holds it
  // (retry later); FailedPrecondition/InvalidArgument with a diagnostic for a refusal (another
  // digest, records that refuse adoption, an artifact whose bytes, links or ownership changed,
  // a missing artifact of a generation whose import may have started, another generation
  // whose references cannot be read). Nothing is deleted unless every check passed.
  absl::Status Collect(int64_t generation, std::string_view digest, const CollectHooks& hooks)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<GenerationDetail> Details() const ABSL_LOCKS_EXCLUDED(mu_);

  // The lease of a READY generation, validated and shared-locked (a native helper's).
  absl::StatusOr<std::unique_ptr<FileLock>> LockShared(int64_t generation)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The helper executable of a READY generation: its Runtime helper (verified again in the
  // release store) or "" for the host's native helper.
  absl::StatusOr<std::string> HelperPath(int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One generation: its phase and the data of its phases. A member is meaningful only in the
  // phases named beside it (docs/architecture.md, "A generation's lifecycle").
  struct Entry {
    Lifecycle life;      // the phase; changed only through Move()
    std::string digest;  // every phase (empty in kFailed when no record named one)
    // kFailed: why its records refuse adoption. kNeedsRepair, kRepairBegun,
    // kRepairFinishing: what is missing (runtime_missing / image_missing).
    std::optional<Diagnostic> diagnostic;
    // kPreparing: the plan (found at start, or Begin's). kRepairBegun, kRepairFinishing: the
    // held generation's artifacts as a plan (import_started).
    std::optional<Plan> plan;
    // kPreparing, kRepairBegun, kRepairFinishing: the verified specification, set by Begin in
    // this process (WriteArtifact and Finish need it).
    std::optional<wire::SpecificationDocument> spec;
    // kReadyAwaitingProbe, kReady, kNeedsRepair, kRepairBegun, kRepairFinishing; kept through
    // kCollecting so that a collection failing before its journal gives it back.
    std::shared_ptr<const HeldGeneration> held;
    // kCollecting, once its journal was read or recorded.
    std::optional<CollectionJournal> journal;
    // kRepairBegun, kRepairFinishing: the files the repair's Begin found missing
    // (WriteArtifact takes only those).
    std::optional<std::set<std::string>> repair_missing;
    // Any phase: why a collection was last refused or left unfinished in this process.
    std::string last_collection_error;

    Phase phase() const { return life.phase(); }
    GenerationState state() const { return life.reported(); }
  };
  // The only way an entry changes phase: Lifecycle::MoveTo. A transition lifecycle.cc does
  // not list is refused, logged, and `e` left unchanged: Unavailable (provider_unavailable),
  // since only a step racing another one can ask for it.
  static absl::Status Move(int64_t generation, Entry& e, Phase to);

  GenerationStore(Fs& fs, Dir node, Dir dir, uint32_t owner, std::string installation_id,
                  std::string provider, ReleaseStore* releases);
  Entry Classify(int64_t generation);
  absl::StatusOr<std::shared_ptr<const HeldGeneration>> LoadFinal(int64_t generation);
  absl::Status Publish(int64_t generation, const Plan& plan,
                       const wire::SpecificationDocument& spec, ImageImporter& importer,
                       std::shared_ptr<const HeldGeneration>* held);
  // The identity of the image `artifact` (stored for `source`) produces, from its own bytes
  // (ImageImporter::ArchiveIdentity); configuration_invalid when it cannot be told or when
  // `acceptable` (when given) does not list it.
  absl::StatusOr<std::string> ArchiveIdentity(ImageImporter& importer, const std::string& source,
                                              const PlannedArtifact& artifact,
                                              const std::vector<std::string>* acceptable);
  // Whether every image of `h` is the one its stored archive produces, recorded in
  // <g>.images (checked once: a record that binds `h`'s final configuration answers OK
  // without reading an archive). A Refusal (configuration_invalid) when one is not; NotFound
  // when an archive is missing (the repair that restores it checks it then).
  absl::Status VerifyImagesDerived(const HeldGeneration& h, ImageImporter& importer);
  // Repair's steps (repair.cc).
  absl::StatusOr<std::vector<std::string>> BeginRepair(int64_t generation,
                                                       std::string_view specification,
                                                       wire::SpecificationDocument spec);
  absl::Status FinishRepair(int64_t generation, ImageImporter& importer,
                            const std::function<absl::Status()>& provider_ready);
  // The artifacts of `h` missing from the release store (every stored one checked: its bytes
  // when `verify_bytes`, else its size), or the refusal of one that conflicts.
  absl::StatusOr<std::vector<std::string>> MissingArtifacts(const HeldGeneration& h,
                                                            bool verify_bytes);
  // What a held generation lacks (nullopt: nothing; images only when `importer` is given), or
  // the refusal.
  absl::StatusOr<std::optional<Diagnostic>> Inspect(const HeldGeneration& h,
                                                    ImageImporter* importer, bool verify_bytes);
  // The installation lock, then the generation's lease exclusively, neither blocking.
  struct RepairLocks {
    std::unique_ptr<FileLock> installation;
    std::unique_ptr<FileLock> lease;
  };
  absl::StatusOr<RepairLocks> LockForRepair(int64_t generation, const std::string& digest);
  // Collection's steps (collection.cc).
  absl::Status CollectLocked(int64_t generation, const std::string& digest,
                             const CollectHooks& hooks, bool* journal_recorded);
  absl::StatusOr<CollectionJournal> NewJournal(int64_t generation, const std::string& digest);
  // The dropped marker of `generation` (it must bind this installation, generation and
  // `digest`) made durable: its directory fsynced. REQUIRES: the marker is in place.
  absl::Status MarkerDurable(int64_t generation, const std::string& digest);
  // REQUIRES: the generation's dropped marker is in place (bound and checked by the caller).
  // Removes what a dropped generation no longer needs (RecordsReclaimedWhenDropped), each only
  // after the marker is durable, then fsyncs the directory. `marker_synced`: the caller has
  // just fsynced the directory after the marker (collection), so the removals follow at once
  // and the directory is fsynced after them even when none was left; otherwise (a start) the
  // directory is fsynced first, and nothing is done at all when nothing is left.
  absl::Status ReclaimDropped(int64_t generation, bool marker_synced);
  // The release paths every recorded generation but `except` and the dropped ones reference.
  absl::StatusOr<std::set<std::string>> RetainedPaths(int64_t except);
  absl::StatusOr<std::vector<PlannedArtifact>> RecordedArtifacts(int64_t generation,
                                                                 bool* import_started,
                                                                 std::string* source);
  std::vector<std::string> NativeImages(int64_t generation);
  // `generation`'s native images that no other recorded, not dropped generation's final
  // configuration names: what collection may ask the backend to forget (a private store's
  // image shared by several generations stays until its last reference). Unavailable when
  // another generation's final configuration exists but cannot be read: nothing is forgotten.
  absl::StatusOr<std::vector<std::string>> UnsharedNativeImages(int64_t generation);

  // The overlapped load of `generation`'s image archive, unless it was never started: why
  // ("" when started). An error when the plan could not be made durable with import_started.
  absl::StatusOr<std::string> StartOverlappedLoad(int64_t generation, const PlannedArtifact& artifact,
                                  ReleaseStore::Writer& writer, ImageImporter& importer)
      ABSL_LOCKS_EXCLUDED(mu_, overlap_mu_);
  // Whether this process's overlapped load of `artifact` for `g` completed OK from exactly the
  // file now published (waits for it first; it is consumed either way).
  bool OverlappedLoadCompleted(int64_t g, const std::string& source, const std::string& artifact)
      ABSL_LOCKS_EXCLUDED(overlap_mu_);
  // Takes this process's overlapped load of `artifact` for `generation`, if any.
  std::unique_ptr<OverlappedLoad> TakeOverlappedLoad(int64_t generation,
                                                     std::string_view artifact)
      ABSL_LOCKS_EXCLUDED(overlap_mu_);

  Fs& fs_;
  const Dir node_;  // node/ (the installation lock)
  const Dir dir_;   // node/generations/
  const uint32_t owner_;
  const std::string installation_id_;
  const std::string provider_;
  ReleaseStore* const releases_;
  mutable absl::Mutex mu_;
  int64_t max_generations_ ABSL_GUARDED_BY(mu_) = kDefaultMaxGenerationRecords;
  std::map<int64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  bool collecting_ ABSL_GUARDED_BY(mu_) = false;
  // ProviderProbePassed ran in this process: a collection that gives back a generation it
  // took in kReadyAwaitingProbe gives it back kReady.
  bool probe_passed_ ABSL_GUARDED_BY(mu_) = false;
  // At most one overlapped load at a time (preparation is serialized).
  absl::Mutex overlap_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<OverlappedLoad> overlapped_ ABSL_GUARDED_BY(overlap_mu_);
};

// Record names.
std::string SpecificationRecordName(int64_t generation);  // "<g>.specification"
std::string PlanName(int64_t generation);                 // "<g>.preparing"
std::string FinalConfigurationName(int64_t generation);   // "<g>.json"
std::string ImagesDerivedName(int64_t generation);        // "<g>.images"
// The records a dropped generation no longer needs, removed once its dropped marker is durable
// (docs/formats.md): its collection journal, specification, plan and images record. The
// marker, the lease, its identity and the final configuration stay (requirements: "the small
// configuration and ownership journals stay as local identity records").
std::vector<std::string> RecordsReclaimedWhenDropped(int64_t generation);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_GENERATIONS_H_

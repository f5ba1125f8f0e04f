// The generations privhelper holds, and everything native about them, from state privhelper
// owns (never from the agent). Records in <state_dir>/node/generations/ (docs/formats.md):
//   <g>.specification   the specification document exactly as Core served it (write-once)
//   <g>.preparing       the preparation plan (plan.h): before any artifact is stored
//   <g>.lease, <g>.lease-identity   the generation's lease (lease.h)
//   <g>.json            the final provider configuration (write-once): installation,
//                       generation, digest, provider, release source, each image with its
//                       resolved native image, the artifacts and the Runtime helper
// with the artifacts in the release store (release_store.h).
//
// A generation is READY (held) iff its final configuration is published and its lease and
// identity validate; PREPARING while a plan exists without a final configuration; FAILED when
// its records refuse adoption (kept as found, with the diagnostic): a lease whose identity
// never became durable, a record of another installation, a specification that no longer
// hashes to its digest, a plan that drifted from its final configuration.
//
// Preparation (the server serializes it; one at a time):
//   Begin   specification checked (digest, §6, generation, provider) and against its release
//           (adopted before, ReleaseStore::Adopt); specification record; plan (import_started
//           false) — or the same plan again when resuming; the artifacts still missing.
//   WriteArtifact  one artifact the plan names, verified while it is stored.
//   Finish  every artifact verified again; plan rewritten with import_started true; images
//           imported (unless the backend already holds them) and resolved; lease and identity;
//           final configuration; plan removed. Each step durable before the next.
// A plan found at start-up is only reported: acting on it (Finish) needs a Begin on the
// current connection first.
//
// Thread-safe.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_GENERATIONS_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_GENERATIONS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/diagnostics.h"
#include "common/wire/http_bodies.h"
#include "privhelper/importer.h"
#include "privhelper/store/fs.h"
#include "privhelper/store/plan.h"
#include "privhelper/store/release_store.h"

namespace sn::privhelper::store {

struct HeldImage {
  std::string name;          // what create's "image" names
  std::string artifact;      // the release artifact it was imported from
  std::string native_image;  // Docker: the immutable image id the resolver returned
};

struct HeldGeneration {
  int64_t generation = 0;
  std::string specification_digest;
  std::string source;
  std::vector<HeldImage> images;
  std::vector<PlannedArtifact> artifacts;
  std::string helper_artifact;  // the Runtime helper to run; "" = the host's native helper

  // The native image of `name`, or nullptr when the specification does not name it.
  const std::string* NativeImage(std::string_view name) const;
};

enum class GenerationState { kPreparing, kReady, kFailed };

struct GenerationStatus {
  int64_t generation = 0;
  std::string specification_digest;
  GenerationState state = GenerationState::kPreparing;
  std::optional<Diagnostic> diagnostic;  // with kFailed
};

class GenerationStore {
 public:
  // Opens (creating) node/generations/ under `state` and classifies every generation it
  // records (see the file comment). Only an unreadable directory stops the start.
  static absl::StatusOr<std::unique_ptr<GenerationStore>> Open(Fs& fs, const Dir& state,
                                                               uint32_t owner,
                                                               std::string installation_id,
                                                               std::string provider,
                                                               ReleaseStore* releases);

  std::vector<GenerationStatus> Statuses() const ABSL_LOCKS_EXCLUDED(mu_);
  // The READY generation, or nullptr.
  std::shared_ptr<const HeldGeneration> Find(int64_t generation) const ABSL_LOCKS_EXCLUDED(mu_);
  bool empty() const ABSL_LOCKS_EXCLUDED(mu_);  // no READY generation

  // Preparation steps (see the file comment). Failures carry their diagnostic
  // (prep_failure.h). Begin returns the artifacts still to store.
  absl::StatusOr<std::vector<std::string>> Begin(int64_t generation,
                                                 std::string_view specification,
                                                 std::string_view digest)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> WriteArtifact(int64_t generation,
                                                                      std::string_view name)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Finish(int64_t generation, ImageImporter& importer) ABSL_LOCKS_EXCLUDED(mu_);

  // The lease of a READY generation, validated and shared-locked (a native helper's).
  absl::StatusOr<std::unique_ptr<FileLock>> LockShared(int64_t generation)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The helper executable of a READY generation: its Runtime helper (verified again in the
  // release store) or "" for the host's native helper.
  absl::StatusOr<std::string> HelperPath(int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    GenerationState state = GenerationState::kPreparing;
    std::string digest;
    std::optional<Diagnostic> diagnostic;
    std::optional<Plan> plan;
    // The verified specification; set by Begin in this process (Finish needs it).
    std::optional<wire::SpecificationDocument> spec;
    std::shared_ptr<const HeldGeneration> held;
  };

  GenerationStore(Fs& fs, Dir dir, uint32_t owner, std::string installation_id,
                  std::string provider, ReleaseStore* releases);
  Entry Classify(int64_t generation);
  absl::StatusOr<std::shared_ptr<const HeldGeneration>> LoadFinal(int64_t generation);
  absl::Status Publish(int64_t generation, const Plan& plan,
                       const wire::SpecificationDocument& spec, ImageImporter& importer,
                       std::shared_ptr<const HeldGeneration>* held);

  Fs& fs_;
  const Dir dir_;
  const uint32_t owner_;
  const std::string installation_id_;
  const std::string provider_;
  ReleaseStore* const releases_;
  mutable absl::Mutex mu_;
  std::map<int64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

// Record names.
std::string SpecificationRecordName(int64_t generation);  // "<g>.specification"
std::string PlanName(int64_t generation);                 // "<g>.preparing"
std::string FinalConfigurationName(int64_t generation);   // "<g>.json"

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_GENERATIONS_H_

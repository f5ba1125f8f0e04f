// Generation management on the agent's event loop (docs/architecture.md, "Generations on the
// node"; seed "Generation control"; spec/wire.md §3, §4). One object holds what the agent
// knows about every generation and decides from it:
//   - facts: privhelper's reports (every probe, and each preparation's answer), the
//     deployment facts of the live connection, the durable pins (pins.h), the scheduler's
//     attempts and their last failures;
//   - preparation (scheduler.h): nothing is prepared before privhelper's first generation
//     report (the agent must know what it holds); a generation-managing node prepares
//     nothing until the live connection delivered deployment facts; then the target, then the serving generation
//     (when privhelper does not report it READY), then the others that need it
//     (RequestPreparation: repairs). A node without generation management
//     prepares its enrolled generation whenever privhelper does not report it READY,
//     connection or not. A generation privhelper holds with another digest than wanted, or
//     reports FAILED, is never prepared: it is observed `failed` (configuration_invalid, or
//     privhelper's diagnostic). A lost connection cancels the attempt in progress.
//   - pins: the target is persisted whenever Core names a new one; the serving pin moves to
//     Core's serving generation only once it is READY locally (with the target's digest when
//     it is the target's number); `null` leaves it. Durable before they count.
//   - observations (GenerationControl): target and serving first, others rotating
//     (observations.h); generations privhelper reports COLLECTING or DROPPED are never
//     reported, prepared or used, except that a target Core names with such a number is
//     observed `failed` + configuration_invalid (§3).
//   - retention (RetentionFacts, for retention.h): the candidates of the retention exchange
//     and the local references (target, serving pin, preparation) rechecked at a grant; a
//     generation being collected answers requests `unconfirmed`.
//   - requests (GenerationGate): run on the generation they name; see generation_gate.h.
// Single-threaded: every method runs on the event loop.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_MANAGER_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "agent/connection/generation_control.h"
#include "agent/generations/observations.h"
#include "agent/generations/pins.h"
#include "agent/generations/retention_facts.h"
#include "agent/generations/scheduler.h"
#include "agent/generations/types.h"
#include "agent/requests/generation_gate.h"
#include "common/clock.h"

namespace sn::agent {

struct GenerationManagerOptions {
  bool generation_management = false;
  GenerationRef enrolled;  // the enrolled generation and its digest
};

// What the agent knows of one generation (tests, logs, the operator's `agent generations` view).
struct GenerationStatus {
  GenerationRef ref;
  wire::GenerationState state = wire::GenerationState::kPreparing;
  std::optional<Diagnostic> diagnostic;
  bool target = false;
  bool serving = false;
  bool held = false;   // privhelper reports it READY with this digest
  std::optional<PreparationProgress> progress;
};

class GenerationManager final : public GenerationControl,
                                public GenerationGate,
                                public RetentionFacts {
 public:
  // The image names of a generation's verified specification (generations/<G>.spec.json
  // checked against the digest), or nullopt when the agent has no usable copy.
  using SpecificationLookup =
      std::function<std::optional<std::set<std::string>>(const GenerationRef& ref)>;
  // Records an attempt's progress or end where the operator view reads it (progress_file.h).
  // `finished` is nullopt while it runs.
  using ProgressRecorder =
      std::function<void(const PreparationJob& job, const PreparationProgress& progress,
                         const std::optional<PreparationOutcome>& finished)>;

  // Pointers must outlive the manager. `recorder` may be empty.
  GenerationManager(GenerationManagerOptions options, const Clock* clock, TimerQueue* timers,
                    PinStore* pins, Preparer* preparer, SpecificationLookup specifications,
                    ProgressRecorder recorder = nullptr);
  ~GenerationManager() override;

  // Loads the durable pins; DataLoss for a torn file (the agent refuses to start).
  absl::Status Start();

  // Every successful probe of this node's privhelper (its installation): the generations it
  // has records of. A PREPARING report of a generation an attempt of this process saw
  // published is taken as READY (the probe was answered before the publication).
  // `provider_unready`: the same probe's provider readiness failed, with this diagnostic; no
  // generation is ready meanwhile (observed `failed` with it, create and a full resume
  // `unconfirmed`, the serving pin stays), whatever privhelper's records say: readiness after
  // any start waits for a passing provider probe (docs/protocol.md 20a).
  void OnGenerationReports(const std::vector<GenerationReport>& reports,
                           std::optional<Diagnostic> provider_unready = std::nullopt);
  // A probe that reached no privhelper of this installation: its last reports stay (nothing is
  // prepared or repaired for it), but no generation is ready until a probe passes again.
  void OnProbeFailed(Diagnostic diagnostic);

  // Issue 11's hook: prepare `ref` again (after the others) while privhelper does not report
  // it READY. It stays requested until it is READY.
  void RequestPreparation(const GenerationRef& ref);

  // GenerationControl.
  void OnDeployment(const wire::Deployment& deployment) override;
  void OnDisconnected() override;
  std::vector<wire::Observation> NextObservations() override;

  // GenerationGate.
  GateAnswer Admit(const wire::Request& request) override;
  std::optional<std::string> DigestOf(int64_t generation) override;

  // RetentionFacts.
  std::vector<GenerationRef> RetentionCandidates() const override;
  std::optional<std::string> LocalReference(const GenerationRef& ref) const override;
  void CollectionStarted(const GenerationRef& ref) override;
  void CollectionEnded(const GenerationRef& ref, std::optional<HeldState> state) override;

  // For a node without generation management: the diagnostic its health reports while the
  // enrolled generation is not held (the last failure of its preparation, else
  // provider_unavailable).
  Diagnostic EnrolledNotHeldDiagnostic() const;

  // Every generation the agent would report, target and serving first, then by generation.
  std::vector<GenerationStatus> Snapshot() const;
  const DeploymentPins& pins() const { return pins_; }
  const PreparationScheduler& scheduler() const { return scheduler_; }

 private:
  void Recompute();
  bool NeedsPreparation(const GenerationRef& ref) const;
  void MovePins();
  void OnAttemptFinished(const PreparationJob& job, const PreparationOutcome& outcome,
                         const PreparationProgress& last);
  std::optional<GenerationRef> CurrentTarget() const;
  GenerationStatus StatusOf(const GenerationRef& ref) const;
  wire::Observation ObservationOf(const GenerationRef& ref) const;
  // privhelper's report of `generation` when it holds it (READY or NEEDS_REPAIR), or
  // nullptr; ReadyReport: READY only.
  const GenerationReport* Held(int64_t generation) const;
  const GenerationReport* ReadyReport(int64_t generation) const;
  // Restart recovery (repair.cc): every held generation privhelper reports NEEDS_REPAIR is
  // requested (RequestPreparation) once; its observation says what is missing.
  void QueueRepairs();
  bool Ready(int64_t generation) const;
  std::optional<std::set<std::string>> ImagesOf(const GenerationRef& ref);

  GenerationManagerOptions options_;
  PinStore* pin_store_;
  SpecificationLookup specifications_;
  ProgressRecorder recorder_;
  PreparationScheduler scheduler_;
  ObservationRotor rotor_;

  bool reported_ = false;                        // privhelper's reports arrived once
  std::map<int64_t, GenerationReport> reports_;  // privhelper's, by generation
  std::optional<Diagnostic> provider_unready_;   // the last probe's, when its provider failed
  // Generations an attempt of this process prepared: privhelper published them (write-once),
  // so a probe answered from before that moment (PREPARING) does not undo it.
  std::set<std::pair<int64_t, std::string>> prepared_here_;
  std::optional<wire::Deployment> facts_;        // of the live connection
  DeploymentPins pins_;
  std::map<std::pair<int64_t, std::string>, Diagnostic> last_failure_;
  std::vector<GenerationRef> repairs_;
  std::map<std::pair<int64_t, std::string>, std::set<std::string>> images_;
  std::set<int64_t> collecting_;  // a CollectGeneration call is in flight
  // Generations privhelper answered DROPPED to a collection of this process: final, so a
  // probe answered before that moment does not bring them back.
  std::set<std::pair<int64_t, std::string>> dropped_here_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_MANAGER_H_

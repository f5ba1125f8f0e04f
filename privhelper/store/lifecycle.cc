#include "privhelper/store/lifecycle.h"

#include "absl/strings/str_cat.h"

namespace sn::privhelper::store {

using P = Phase;

// Every transition a generation makes, and the only ones (docs/architecture.md prints this
// table; docs/formats.md each record's format and fsync order).
const Transition kTransitions[] = {
    // A start adopts what the records say (GenerationStore::Classify), every directory fsynced
    // when opened, stray temporaries removed.
    {P::kAbsent, P::kDropped, "start: a dropped marker of this installation",
     "records a collection left beside the marker (journal, specification, plan, images record): "
     "directory fsynced, unlinked, directory fsynced"},
    {P::kAbsent, P::kCollecting, "start: a collection journal", "nothing"},
    {P::kAbsent, P::kPreparing, "start: a plan without a final configuration", "nothing"},
    {P::kAbsent, P::kReadyAwaitingProbe, "start: a final configuration with a valid lease",
     "a plan left beside the same final configuration: unlinked, directory fsynced"},
    {P::kAbsent, P::kFailed, "start: records that refuse adoption", "nothing (kept as found)"},
    // Preparation (Begin, WriteArtifact, Finish).
    {P::kAbsent, P::kPreparing, "Begin of a generation not recorded (within the caps)",
     "<g>.specification (write-once), then <g>.preparing (write-once, import_started false)"},
    {P::kPreparing, P::kPreparing, "Begin again (resume)",
     "<g>.specification and <g>.preparing written as for the first Begin when absent; an "
     "existing one must agree"},
    {P::kPreparing, P::kReady, "Finish",
     "<g>.preparing replaced with import_started true; images imported; <g>.lease, "
     "<g>.lease-identity; <g>.images (replacing); <g>.json (write-once); <g>.preparing "
     "unlinked, directory fsynced"},
    {P::kPreparing, P::kFailed, "Finish refused: ownership_refused", "nothing"},
    // A READY generation.
    {P::kReadyAwaitingProbe, P::kReady, "the provider's probe passed", "nothing"},
    {P::kReadyAwaitingProbe, P::kNeedsRepair, "Recheck: a Runtime file or native image missing",
     "nothing (in memory only: the next start finds it again)"},
    {P::kReady, P::kNeedsRepair, "Recheck: a Runtime file or native image missing",
     "nothing (in memory only: the next start finds it again)"},
    {P::kReadyAwaitingProbe, P::kFailed,
     "Recheck: changed bytes, links, ownership, or images not derived from their archives",
     "nothing (kept as found)"},
    {P::kReady, P::kFailed,
     "Recheck: changed bytes, links, ownership, or images not derived from their archives",
     "nothing (kept as found)"},
    // Repair (Begin, WriteArtifact, Finish of a held generation).
    {P::kNeedsRepair, P::kRepairBegun, "Begin with the recorded specification",
     "node/installation.lock (created once)"},
    {P::kRepairBegun, P::kRepairBegun, "Begin again", "nothing"},
    {P::kNeedsRepair, P::kFailed, "Begin: a stored file conflicts", "nothing (kept as found)"},
    {P::kRepairBegun, P::kFailed, "Begin: a stored file conflicts", "nothing (kept as found)"},
    {P::kRepairBegun, P::kRepairFinishing, "Finish starts", "nothing"},
    {P::kRepairFinishing, P::kReady, "Finish: files verified, images re-imported, probe passed",
     "the missing artifacts (stored by WriteArtifact: temporary, fsync, RENAME_NOREPLACE, "
     "directory fsync); <g>.images (replacing) once the images are checked"},
    {P::kRepairFinishing, P::kNeedsRepair, "Finish failed (transient)", "nothing"},
    {P::kRepairFinishing, P::kFailed, "Finish refused", "nothing (kept as found)"},
    // Collection (Collect under the installation lock and the exclusive lease).
    {P::kPreparing, P::kCollecting, "Collect: locks taken, nothing references it", "nothing yet"},
    {P::kReadyAwaitingProbe, P::kCollecting, "Collect: locks taken, nothing references it",
     "nothing yet"},
    {P::kReady, P::kCollecting, "Collect: locks taken, nothing references it", "nothing yet"},
    {P::kNeedsRepair, P::kCollecting, "Collect: locks taken, nothing references it",
     "nothing yet"},
    {P::kRepairBegun, P::kCollecting, "Collect: locks taken, nothing references it",
     "nothing yet"},
    {P::kRepairFinishing, P::kCollecting, "Collect: locks taken, nothing references it",
     "nothing yet"},
    {P::kCollecting, P::kCollecting, "Collect of a COLLECTING generation (a fresh grant)",
     "nothing yet"},
    {P::kCollecting, P::kDropped, "Collect finished",
     "<g>.collecting (write-once) before the first deletion; rewritten with native_done after "
     "the native cleanup; release files unlinked, their directory fsynced; <g>.dropped "
     "(write-once); journal, specification, plan, images record unlinked, directory fsynced"},
    // A collection that failed before its journal was recorded changed nothing on disk.
    {P::kCollecting, P::kPreparing, "Collect failed before its journal", "nothing"},
    {P::kCollecting, P::kReadyAwaitingProbe, "Collect failed before its journal", "nothing"},
    {P::kCollecting, P::kReady, "Collect failed before its journal", "nothing"},
    {P::kCollecting, P::kNeedsRepair, "Collect failed before its journal", "nothing"},
    {P::kCollecting, P::kRepairBegun, "Collect failed before its journal", "nothing"},
};
const int kTransitionCount = sizeof(kTransitions) / sizeof(kTransitions[0]);

std::string_view PhaseName(Phase p) {
  switch (p) {
    case P::kAbsent: return "absent";
    case P::kPreparing: return "preparing";
    case P::kReadyAwaitingProbe: return "ready_awaiting_probe";
    case P::kReady: return "ready";
    case P::kNeedsRepair: return "needs_repair";
    case P::kRepairBegun: return "repair_begun";
    case P::kRepairFinishing: return "repair_finishing";
    case P::kCollecting: return "collecting";
    case P::kDropped: return "dropped";
    case P::kFailed: return "failed";
  }
  return "unknown";
}

GenerationState ReportedState(Phase p) {
  switch (p) {
    case P::kAbsent:
    case P::kPreparing: return GenerationState::kPreparing;
    case P::kReadyAwaitingProbe:
    case P::kReady: return GenerationState::kReady;
    case P::kNeedsRepair:
    case P::kRepairBegun:
    case P::kRepairFinishing: return GenerationState::kNeedsRepair;
    case P::kCollecting: return GenerationState::kCollecting;
    case P::kDropped: return GenerationState::kDropped;
    case P::kFailed: return GenerationState::kFailed;
  }
  return GenerationState::kFailed;
}

bool IsHeld(Phase p) {
  const GenerationState s = ReportedState(p);
  return p != P::kAbsent && (s == GenerationState::kReady || s == GenerationState::kNeedsRepair);
}

const Transition* FindTransition(Phase from, Phase to) {
  for (int i = 0; i < kTransitionCount; ++i) {
    if (kTransitions[i].from == from && kTransitions[i].to == to) return &kTransitions[i];
  }
  return nullptr;
}

absl::Status Lifecycle::MoveTo(Phase to) {
  if (FindTransition(phase_, to) == nullptr) {
    const std::string_view from = PhaseName(phase_);
    const std::string_view dest = PhaseName(to);
    return absl::FailedPreconditionError(
        absl::StrCat("the generation's lifecycle has no transition from ",
                     absl::string_view(from.data(), from.size()), " to ",
                     absl::string_view(dest.data(), dest.size())));
  }
  phase_ = to;
  return absl::OkStatus();
}

}  // namespace sn::privhelper::store

// The lifecycle of one generation privhelper records: its phases and the only transitions
// between them, in one table (docs/architecture.md, "A generation's lifecycle", prints it with
// the durable step of each; docs/formats.md has each record's format and fsync order).
//
// A phase is the reported GenerationState refined by what this process knows of it: READY
// adopted at this start and not yet confirmed by a provider probe, NEEDS_REPAIR with a
// repair's Begin done or its Finish running. kAbsent is "no entry": the source of the
// transitions a start (adoption) or a first Begin makes. Every change of phase goes through
// Lifecycle::MoveTo, which refuses one the table does not list and leaves the phase as it was.
// Pure values; no locking (GenerationStore guards its entries with its own mutex).
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_LIFECYCLE_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_LIFECYCLE_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace sn::privhelper::store {

enum class GenerationState { kPreparing, kReady, kFailed, kCollecting, kDropped, kNeedsRepair };

enum class Phase : uint8_t {
  kAbsent,              // no entry (before a start adopts it, or before its first Begin)
  kPreparing,           // PREPARING: a plan without a final configuration
  kReadyAwaitingProbe,  // READY as adopted at this start; Ready() false until a probe passed
  kReady,               // READY, usable
  kNeedsRepair,         // NEEDS_REPAIR: held, something missing, no repair begun
  kRepairBegun,         // NEEDS_REPAIR: a repair's Begin found the missing files
  kRepairFinishing,     // NEEDS_REPAIR: the repair's Finish runs (a second one is Unavailable)
  kCollecting,          // COLLECTING: a collection holds it (or a journal was found at start)
  kDropped,             // DROPPED: its marker is durable; never used again
  kFailed,              // FAILED: its records refuse adoption; kept as found
};

// "absent", "preparing", "ready_awaiting_probe", ...
std::string_view PhaseName(Phase p);
// The state reported for a phase (ListGenerations, Probe). kAbsent is never reported.
GenerationState ReportedState(Phase p);
// Held: Find() returns it (READY or NEEDS_REPAIR, whatever the sub-phase).
bool IsHeld(Phase p);

// One allowed transition: the step that makes it and what that step makes durable (the file
// written, renamed, removed or fsynced; "nothing" when the transition is in memory only).
struct Transition {
  Phase from;
  Phase to;
  std::string_view step;
  std::string_view durable;
};

// The table (lifecycle.cc). Its order is the order docs/architecture.md prints it in.
extern const Transition kTransitions[];
extern const int kTransitionCount;

// The table's row for `from` → `to`, or nullptr.
const Transition* FindTransition(Phase from, Phase to);

class Lifecycle {
 public:
  Lifecycle() = default;
  Phase phase() const { return phase_; }
  GenerationState reported() const { return ReportedState(phase_); }
  // Moves to `to` when kTransitions lists phase() → `to`; otherwise FailedPrecondition naming
  // both phases, and the phase is unchanged.
  absl::Status MoveTo(Phase to);

 private:
  Phase phase_ = Phase::kAbsent;
};

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_LIFECYCLE_H_

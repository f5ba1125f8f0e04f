// Plain facts shared by the agent's generation management (docs/architecture.md, "Generations
// on the node"): what privhelper reports about a generation, what the agent asks to prepare,
// and how a preparation attempt went. No behaviour; any thread.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_TYPES_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_TYPES_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/diagnostics.h"

namespace sn::agent {

// A (generation, specification digest) pair.
struct GenerationRef {
  int64_t generation = 0;
  std::string specification_digest;
  bool operator==(const GenerationRef&) const = default;
};

// privhelper's record of a generation (proto GenerationState).
enum class HeldState {
  kPreparing,  // a preparation plan exists; not usable
  kReady,      // held: final configuration, lease and identity published
  kFailed,     // refused for adoption; kept as found
  kCollecting,  // an unfinished collection journal: never usable, prepared or reported again
  kDropped,     // collected (dropped marker): never usable, prepared or reported again
  // held, but Runtime files or a native image are missing (diagnostic runtime_missing /
  // image_missing): every operation but create and a full resume runs; a repair is queued
  kNeedsRepair,
};

// The name `agent generations` and the logs use ("preparing", "ready", "failed",
// "collecting", "dropped", "needs_repair").
inline std::string_view HeldStateName(HeldState s) {
  switch (s) {
    case HeldState::kPreparing: return "preparing";
    case HeldState::kReady: return "ready";
    case HeldState::kFailed: return "failed";
    case HeldState::kCollecting: return "collecting";
    case HeldState::kDropped: return "dropped";
    case HeldState::kNeedsRepair: return "needs_repair";
  }
  return "failed";
}

// True for the states a generation never leaves (no preparation, no use, no observation).
inline bool IsRetired(HeldState s) {
  return s == HeldState::kCollecting || s == HeldState::kDropped;
}

// One entry of privhelper's Probe `generations` (or of a preparation step's answer).
struct GenerationReport {
  int64_t generation = 0;
  std::string specification_digest;
  HeldState state = HeldState::kPreparing;
  std::optional<Diagnostic> diagnostic;  // with kFailed and kNeedsRepair
  bool operator==(const GenerationReport&) const = default;
};

// Why a generation is prepared; also its priority (lower first).
enum class JobRole { kTarget = 0, kServing = 1, kOther = 2 };
inline std::string_view JobRoleName(JobRole r) {
  switch (r) {
    case JobRole::kTarget: return "target";
    case JobRole::kServing: return "serving";
    case JobRole::kOther: return "other";
  }
  return "other";
}

struct PreparationJob {
  GenerationRef ref;
  JobRole role = JobRole::kOther;
  bool operator==(const PreparationJob&) const = default;
};

// Where a running attempt is. Bytes count the artifacts being uploaded to privhelper.
struct PreparationProgress {
  std::string phase;     // "specification", "release", "upload", "import"
  std::string artifact;  // the artifact being uploaded ("" outside "upload")
  int64_t bytes_done = 0;
  int64_t bytes_total = 0;
  bool operator==(const PreparationProgress&) const = default;
};

// How one attempt ended.
struct PreparationOutcome {
  // nullopt: the generation is ready (privhelper published it). Otherwise the §7 code:
  // runtime_download_failed only for transfer, checksum and provenance failures.
  std::optional<Diagnostic> failure;
  // privhelper's state of the generation after its last answer, when it gave one.
  std::optional<HeldState> state;
  // On success: the image names of the verified specification (what create may name).
  std::set<std::string> images;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_TYPES_H_

// GenerationManager's restart recovery (requirements "Restart recovery"): privhelper
// reports a held generation whose Runtime files or native image went missing NEEDS_REPAIR;
// the agent requests its repair, which the scheduler runs like any preparation (serialized,
// after the target and serving generations, 30-minute deadline, 1/2/5/10/30-minute backoff)
// and which fetches that exact generation's specification from the configuration route
// (prepare.cc: checked against the recorded digest), never the current Runtime. A
// generation-managing node runs nothing before the connection delivered deployment facts
// (Recompute); a node without generation management repairs its enrolled generation at every
// start, connected or not.
#include <algorithm>

#include "agent/generations/manager.h"
#include "common/log.h"

namespace sn::agent {

void GenerationManager::QueueRepairs() {
  for (const auto& [g, r] : reports_) {
    if (r.state != HeldState::kNeedsRepair) continue;
    if (!options_.generation_management && g != options_.enrolled.generation) continue;
    const GenerationRef ref{g, r.specification_digest};
    if (std::find(repairs_.begin(), repairs_.end(), ref) != repairs_.end()) continue;
    LogWarning("privhelper reports a held generation that needs repair; queued",
               {{"generation", g},
                {"diagnostic", DiagnosticCode(r.diagnostic.value_or(Diagnostic::kRuntimeMissing))}});
    repairs_.push_back(ref);
  }
}

}  // namespace sn::agent

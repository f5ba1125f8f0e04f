// A seeded, deterministic simulation of Core and the node (issue #27, part 1;
// docs/reliability.md, "Seeded simulation"). The agent's real state machines
// (Connection, RequestQueue, OperationRecord, GenerationManager,
// RetentionDecisions, the FileEpochStore/FilePinStore and the retention record)
// run in one thread against a simulated Core, a simulated privhelper (behind
// the OperationExecutor and GenerationCollector seams), SimulatedClock and
// FaultFs. One std::mt19937_64 seeded from the seed drives every choice: the
// fault rates of the run, what Core sends, frame latencies, privhelper's
// answers, crashes, clock jumps.
//
// A run is a sequence of steps. Each step lets Core and the faults act, then
// advances the simulated clock (timers fire, frames arrive), then checks every
// invariant (Invariants()). The run stops at the first violation; that step
// count is the shortest that fails, and Run({seed, step}) replays it exactly.
#ifndef SANDBOX_NODE_TESTS_SIM_WORLD_H_
#define SANDBOX_NODE_TESTS_SIM_WORLD_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sn::sim {

// A bug of the kind this project guards against, re-introduced by injecting a
// faulty seam implementation or start-up wiring (never a product flag): the
// simulator must find each.
enum class Bug {
  kNone,
  // The agent's start does not recover the operation record (a replay after a
  // restart).
  kSkipRecordRecovery,
  // The end of a connection is not told to the retention decisions: its
  // collection in flight is not cancelled, so a drop granted on one connection
  // completes on the next.
  kRetentionNotToldOfDisconnect,
  // The owner epoch is kept in memory only: after a restart a lower epoch is
  // accepted.
  kVolatileOwnerEpoch,
};
bool ParseBug(std::string_view name, Bug* bug);
std::string_view BugName(Bug bug);

struct Options {
  uint64_t seed = 0;
  uint64_t steps = 100000;
  Bug bug = Bug::kNone;
  bool trace = false;  // print every event (stderr)
};

struct InvariantInfo {
  const char* name;
  const char* requirement;  // the requirement's words
};
// Every invariant the simulator checks, in the order it checks them.
const std::vector<InvariantInfo>& Invariants();

struct RunResult {
  bool ok = true;
  uint64_t steps_run = 0;  // the failing step when !ok
  std::string invariant;
  std::string detail;
  uint64_t trace_hash = 0;                   // FNV-1a over every event of the run
  std::map<std::string, uint64_t> counters;  // what happened (faults, frames, executions)
  std::string fault_rates;                   // the rates this seed chose
};

RunResult Run(const Options& options);

}  // namespace sn::sim

#endif  // SANDBOX_NODE_TESTS_SIM_WORLD_H_

// The crash-point method for the node's durable state (privhelper's store, the agent's durable
// files), on FaultFs (fault_fs.h).
//
// A CrashCase is an operation on durable state and what a restart must find afterwards. The
// harness runs the operation once on a copy of the initial state to count its mutating steps
// N, then once per injection point, each time from a fresh copy of the initial state. An
// operation that first starts its process (opens the stores, which has durable steps of its
// own) calls `started` when that is done: faults are armed and steps counted from there, so a
// sweep of one operation is not spent on the start (the start has its own case). An operation
// that never calls it is armed before its first step. The injection points:
//  - RunCrashPoints: the process dies at step k (k = 1..N; the step does not happen), and
//    once more after the operation returned (point N+1);
//  - RunFaultPoints: step k fails with a given status (EIO, ENOSPC, ...); the operation must
//    report an error (unless step k removes a temporary: that cleanup is best-effort, a start
//    removes what is left);
//  - RunFailedSyncs: every fsync (file and directory) fails;
//  - RunByteBudgets: the filesystem is full after b more bytes, for every b below what the
//    operation writes.
// After each run the state is restarted every way it can come back: as after a kill -9
// (nothing lost), and as after a power loss in every variant FaultFs models (each prefix of
// the pending directory operations persisted, unsynced file data lost, torn or kept). Each
// restart calls the case's `restart`, which reopens the store the way the next start would,
// checks the invariants and returns what that start adopted (say, the identity it read).
// Then, unless the options say otherwise, the state that restart left is crashed again in
// every power-loss variant and restarted once more: what the first restart adopted must
// still be what the second one adopts ("nothing adopted that was not durable").
//
// Adding an operation is a CrashCase of three lambdas; see tests/privhelper/store/store_crash_test.cc
// and tests/agent/state/state_crash_test.cc.
#ifndef SANDBOX_NODE_TESTS_FAKES_CRASH_POINTS_H_
#define SANDBOX_NODE_TESTS_FAKES_CRASH_POINTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/fakes/fault_fs.h"

namespace sn::fs {

// How the run a restart follows ended.
struct RunEnd {
  enum class Event { kCompleted, kCrashed, kFailed };
  Event event = Event::kCompleted;
  int64_t step = 0;  // the step the crash or fault hit; 0 when none did
  // What the operation returned. OK means it promised its effect: every restart must see it.
  absl::StatusOr<std::string> result;
  bool second_restart = false;  // a power loss after a first restart
  std::string description;      // for messages
};

struct CrashCase {
  std::string name;
  FaultFs::Options fs_options;
  // Builds the initial state (optional). Runs once, without faults; the state it leaves, made
  // durable, is what every run starts from.
  std::function<void(FaultFs&)> setup;
  // The operation, as a fresh process: opens what it needs from fs.Root(), and calls
  // `started` (optional, at most once) when its start is over. Its value (e.g. the identity it
  // created) is handed to `restart` in RunEnd::result.
  std::function<absl::StatusOr<std::string>(FaultFs&, const std::function<void()>& started)>
      operation;
  // A restart: reopens from fs.Root(), checks the invariants (an error names the violation),
  // may complete what the operation began, and returns what it adopted ("" for nothing).
  std::function<absl::StatusOr<std::string>(FaultFs&, const RunEnd&)> restart;
};

enum class SecondPowerLoss {
  kNone,            // one restart per state
  kAfterPowerLoss,  // only after restarts that followed a power loss
  kAlways,          // also after restarts that followed a kill -9 or a reported error
};

// The environment's SN_FAULT_POINT_SAMPLE (a whole number >= 1), else 1. .bazelrc's asan
// configuration sets 4: the sanitizer run of the sweeps (2.5x slower than the first phase's,
// which runs every point) then runs every crash point but a quarter of the fault points and
// byte budgets (docs/tests.md, "Crash points").
int64_t FaultSampleFromEnvironment();

struct PointOptions {
  SecondPowerLoss second_power_loss = SecondPowerLoss::kAlways;
  // RunByteBudgets: at most this many budgets, evenly spread over the bytes written (every
  // byte when the operation writes fewer).
  int64_t max_budget_points = 2048;
  // 1 in `fault_sample` of RunFaultPoints' steps (the first, every fault_sample-th after it,
  // and the last) and of RunByteBudgets' budgets. Never RunCrashPoints: every crash point
  // runs, so the outcomes a test says its crash sweep reached are reached in every
  // configuration.
  int64_t fault_sample = FaultSampleFromEnvironment();
};

struct PointReport {
  std::string name;
  int64_t start_steps = 0;  // steps of the process start before `started` (not swept)
  int64_t steps = 0;      // mutating steps of one uninterrupted run after the start
  int64_t points = 0;     // injection points run
  int64_t restarts = 0;   // restarts checked (first and second)
  int64_t triggered = 0;  // points whose fault or crash actually hit the operation
  int64_t sample = 1;     // 1 in `sample` of the points was run (PointOptions::fault_sample)
  std::vector<std::string> violations;
  // What the first restarts adopted, and how often (so a test can show a sweep reached the
  // outcomes it claims to check).
  std::map<std::string, int64_t> adopted;
  std::string Summary() const;  // "steps=7 points=8 restarts=112 violations=0"
};

// The uninterrupted run: its steps (the step log, the start's included) and its result.
struct CleanRun {
  absl::StatusOr<std::string> result;
  std::vector<std::string> step_log;
  int64_t start_steps = 0;     // steps before `started` was called (0 when it never was)
  bool calls_started = false;
  uint64_t bytes_written = 0;  // after the start: what RunByteBudgets sweeps
};
CleanRun RunClean(const CrashCase& c);

PointReport RunCrashPoints(const CrashCase& c, const PointOptions& options = {});
PointReport RunFaultPoints(const CrashCase& c, const absl::Status& fault,
                           const PointOptions& options = {});
PointReport RunFailedSyncs(const CrashCase& c, const absl::Status& fault,
                           const PointOptions& options = {});
PointReport RunByteBudgets(const CrashCase& c, const PointOptions& options = {});

// gtest: fails the current test with the first violations, and records the numbers as test
// properties and on stdout ("CRASH-POINTS <name> <kind>: <summary>").
void ExpectNoViolations(const PointReport& report, const std::string& kind);

}  // namespace sn::fs

#endif  // SANDBOX_NODE_TESTS_FAKES_CRASH_POINTS_H_

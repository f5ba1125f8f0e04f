// How long the agent waits for each of privhelper's calls (proto/privhelper.proto): one table,
// so the backstops of every caller are read and changed in one place. Each bounds one call
// (its gRPC deadline, set with SetCallDeadline, channel.h); none is a retry policy.
#ifndef SANDBOX_NODE_AGENT_PRIVHELPER_RPC_DEADLINES_H_
#define SANDBOX_NODE_AGENT_PRIVHELPER_RPC_DEADLINES_H_

#include "absl/time/time.h"

namespace sn::agent {

// Probe while `agent run` runs: the start-up check and every health report (a local process
// that answers at once; a health report must not wait behind it).
inline constexpr absl::Duration kProbeDeadline = absl::Seconds(5);
// Probe by `agent enroll`, which an operator runs once, right after privhelper started.
inline constexpr absl::Duration kEnrollProbeDeadline = absl::Seconds(15);
// ListGenerations for `agent generations` (read-only).
inline constexpr absl::Duration kListGenerationsDeadline = absl::Seconds(5);
// A preparation's AdoptRelease and BeginPreparation.
inline constexpr absl::Duration kPreparationStepDeadline = absl::Minutes(2);
// An artifact's PutArtifact stream and FinishPreparation (an image import). Both preparation
// deadlines are backstops: the attempt's own deadline cancels its token first.
inline constexpr absl::Duration kPreparationLongDeadline = absl::Minutes(31);
// One CollectGeneration: a collection verifies and removes files, so it is generous.
inline constexpr absl::Duration kCollectDeadline = absl::Minutes(10);
// Execute: added to the request's remaining budget for the call's deadline. The agent never
// cancels a call (requests/executor.h): privhelper anchors the same budget, signals the native
// helper at its end and answers with the final outcome within its HelperManager::
// kFinalOutcomeGrace (3 s), so this grace must exceed that; it only bounds a call that never
// returns.
inline constexpr absl::Duration kExecuteDeadlineGrace = absl::Seconds(10);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_PRIVHELPER_RPC_DEADLINES_H_

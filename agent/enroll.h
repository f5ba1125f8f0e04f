// `agent enroll`: registers this installation with Core (spec/wire.md §6), hands privhelper the
// enrolled generation, and stores the node identity, credential and verified specification.
#ifndef SANDBOX_NODE_AGENT_ENROLL_H_
#define SANDBOX_NODE_AGENT_ENROLL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/config.h"
#include "agent/state_files.h"

namespace sn::agent {

// Steps, in order (docs/formats.md gives the crash behaviour of each):
//   1. Probe privhelper: its provider, backend fingerprint, installation identity (privhelper
//      owns it; the agent never chooses one) and limits (max_active, max_retained).
//   2. POST the enroll body to Core.
//   3. On 201: write node/credential (0600), then node/enrollment.json (the identity to be).
//   4. GET the enrolled generation's specification with the credential; verify its SHA-256
//      against the enrolled digest and decode it (nothing is written yet).
//   5. RegisterGeneration: privhelper now holds the generation (idempotent).
//   6. Write generations/<G>.spec.json.
//   7. Write node/identity.json — the node is enrolled — and remove node/enrollment.json.
// An enrollment interrupted after step 3 (Core unreachable for the specification, privhelper
// down, a crash) is finished by running `agent enroll` again: with node/enrollment.json and
// the credential present it resumes at step 4 against the same privhelper installation, and
// the token is not used again. A node with node/identity.json is enrolled: enroll refuses.
// Errors: Unauthenticated for a rejected token or credential (HTTP 401); FailedPrecondition
// for 409 (installation already enrolled), an enrolled node, or privhelper's refusal;
// Unavailable when Core or privhelper cannot be reached; DataLoss for a specification that
// fails verification. Messages never hold the token or the credential.
absl::Status Enroll(const AgentConfig& config, const std::string& token);

// Fetches `identity`'s specification with the node credential and verifies it (steps 4).
absl::StatusOr<std::string> FetchSpecification(const AgentConfig& config,
                                               const NodeIdentity& identity,
                                               const std::string& credential);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_ENROLL_H_

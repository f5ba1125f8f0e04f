// `agent enroll`: registers this installation with Core (spec/wire.md §6), prepares the
// enrolled generation in privhelper (a node without generation management), and stores the
// node identity, credential and verified specification.
#ifndef SANDBOX_NODE_AGENT_CLI_ENROLL_H_
#define SANDBOX_NODE_AGENT_CLI_ENROLL_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/state/config.h"
#include "agent/state/state_files.h"
#include "common/wire/http_bodies.h"

namespace sn::agent {

// Steps, in order (docs/formats.md gives the crash behaviour of each):
//   1. Probe privhelper: its provider, backend fingerprint, installation identity (privhelper
//      owns it; the agent never chooses one) and limits (max_active, max_retained).
//   2. POST the enroll body to Core.
//   3. On 201: write node/credential (0600), then node/enrollment.json (the identity to be).
//   4. A node without generation management prepares its enrolled generation through the
//      same path a running agent uses (generations/prepare.h: the verified specification,
//      the release pinned to its verified manifest, privhelper's plan, verified bytes, final
//      configuration and lease), which stores generations/<G>.spec.json on the way. A
//      generation-managing node prepares nothing before a connection delivered deployment
//      facts: it fetches and verifies the specification and writes generations/<G>.spec.json.
//   5. Write node/identity.json — the node is enrolled — and remove node/enrollment.json.
// An enrollment interrupted after step 3 (Core unreachable, a release that fails
// verification, privhelper down, a crash) is finished by running `agent enroll` again: with
// node/enrollment.json and the credential present it resumes at step 4 against the same
// privhelper installation (privhelper resumes or revalidates its plan), and the token is not
// used again. A node with node/identity.json is enrolled: enroll refuses.
// Errors: Unauthenticated for a rejected token or credential (HTTP 401); FailedPrecondition
// for 409 (installation already enrolled), an enrolled node, or a preparation privhelper
// refused (ownership, storage); Unavailable when Core or privhelper cannot be reached or a
// download failed; DataLoss for a specification that fails verification
// (configuration_invalid). Messages never hold the token or the credential.
absl::Status Enroll(const AgentConfig& config, const std::string& token);

// `agent enroll --resume`: finishes the enrollment whose node/credential and
// node/enrollment.json are present (steps 4-5 above), without a token. The installer
// (tools/install) writes those two files from the enrollment it made and then runs this as
// the agent's user. NotFound when no enrollment is pending; FailedPrecondition for an
// enrolled node; otherwise the errors of Enroll.
absl::Status ResumePendingEnrollment(const AgentConfig& config);

// Step 2 alone: POST `request` to Core's enroll route. Unauthenticated for 401 (the token is
// wrong or spent), FailedPrecondition for 409, Unavailable for another status or no answer,
// DataLoss for an invalid 201 body. sandbox-node-install enrolls with it too.
absl::StatusOr<wire::EnrollResponse> CallEnrollRoute(const Origin& origin,
                                                     const std::optional<std::string>& ca_bundle,
                                                     const wire::EnrollRequest& request);

// Fetches `identity`'s specification with the node credential and verifies it (step 4 of a
// generation-managing node).
absl::StatusOr<std::string> FetchSpecification(const AgentConfig& config,
                                               const NodeIdentity& identity,
                                               const std::string& credential);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CLI_ENROLL_H_

// `agent enroll`: registers this installation with Core (spec/wire.md §6) and stores the
// node identity, credential and the enrolled generation's verified specification.
#ifndef SANDBOX_NODE_AGENT_ENROLL_H_
#define SANDBOX_NODE_AGENT_ENROLL_H_

#include <string>

#include "absl/status/status.h"
#include "agent/config.h"
#include "agent/state_files.h"

namespace sn::agent {

// Steps, in order: (1) installation_id from state_dir/node/installation_id, created and
// persisted before the first attempt and reused on retry; (2) provider and backend
// fingerprint from a privhelper probe; (3) POST the enroll body; (4) on 201 write the
// credential (0600) then identity.json, both atomically; (5) GET the configuration of the
// enrolled generation with the credential, check its SHA-256 against the enrolled digest,
// decode it and store generations/<G>.spec.json.
// Errors: Unauthenticated for a rejected token (HTTP 401); FailedPrecondition for 409
// (installation already enrolled); Unavailable when Core or privhelper cannot be reached;
// DataLoss for a specification that fails verification. Messages never hold the token or
// the credential.
absl::Status Enroll(const AgentConfig& config, const std::string& token);

// Fetches generation `generation`'s specification with the node credential, verifies its
// SHA-256 against `digest` and its contents, and stores it. Used by Enroll.
absl::Status FetchSpecification(const AgentConfig& config, const StateFiles& files,
                                const NodeIdentity& identity, const std::string& credential);

// Lowercase hex SHA-256.
std::string Sha256Hex(const std::string& bytes);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_ENROLL_H_

// A generation's specification document (spec/wire.md §6) as the agent checks and stores it:
// generations/<G>.spec.json holds the exact bytes Core served. The same checks run when a
// preparation (or `agent enroll`) fetches it and whenever the agent reads it back: SHA-256
// equal to the digest Core announced for the generation, a document that decodes strictly,
// naming that generation and the node's provider.
#ifndef SANDBOX_NODE_AGENT_STATE_SPECIFICATION_H_
#define SANDBOX_NODE_AGENT_STATE_SPECIFICATION_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "agent/state/state_files.h"
#include "common/sha256.h"  // Sha256Hex, used with these checks
#include "common/wire/http_bodies.h"

namespace sn::agent {

struct VerifiedSpecification {
  std::string bytes;              // exactly as served
  std::set<std::string> images;   // the image names create may use
  wire::SpecificationDocument document;
};

// DataLoss, naming the failed check, unless `bytes` hash to `digest` and decode as the
// specification of `generation` for `provider`.
absl::StatusOr<VerifiedSpecification> VerifySpecificationBytes(std::string bytes,
                                                               int64_t generation,
                                                               const std::string& digest,
                                                               const std::string& provider);

// The enrolled generation's specification (identity's generation, digest and provider).
absl::StatusOr<VerifiedSpecification> VerifySpecification(std::string bytes,
                                                          const NodeIdentity& identity);

// Reads generations/<G>.spec.json and verifies it as VerifySpecificationBytes does. NotFound
// when the file does not exist.
absl::StatusOr<VerifiedSpecification> LoadSpecificationFor(const StateFiles& files,
                                                           int64_t generation,
                                                           const std::string& digest,
                                                           const std::string& provider);

// Reads generations/<G>.spec.json for the enrolled generation and verifies it.
absl::StatusOr<VerifiedSpecification> LoadSpecification(const StateFiles& files,
                                                        const NodeIdentity& identity);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_STATE_SPECIFICATION_H_

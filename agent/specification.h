// The enrolled generation's specification document (spec/wire.md §6) as the agent checks and
// stores it: generations/<G>.spec.json holds the exact bytes Core served. The same checks run
// when `agent enroll` fetches it and whenever `agent run` reads it back: SHA-256 equal to the
// enrolled digest, a document that decodes strictly, naming the enrolled generation and
// provider.
#ifndef SANDBOX_NODE_AGENT_SPECIFICATION_H_
#define SANDBOX_NODE_AGENT_SPECIFICATION_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "agent/state_files.h"
#include "common/sha256.h"  // Sha256Hex, used with these checks

namespace sn::agent {

struct VerifiedSpecification {
  std::string bytes;              // exactly as served
  std::set<std::string> images;   // the image names create may use
};

// DataLoss, naming the failed check, unless `bytes` is `identity`'s specification.
absl::StatusOr<VerifiedSpecification> VerifySpecification(std::string bytes,
                                                          const NodeIdentity& identity);

// Reads generations/<G>.spec.json for the enrolled generation and verifies it.
absl::StatusOr<VerifiedSpecification> LoadSpecification(const StateFiles& files,
                                                        const NodeIdentity& identity);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_SPECIFICATION_H_

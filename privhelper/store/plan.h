// A generation's preparation plan, node/generations/<g>.preparing (docs/formats.md). Written
// before any artifact is downloaded, with import_started false; rewritten with it true before
// the importer runs; removed once the final configuration is durable. It is a recovery and
// collection plan, never a provider: nothing is built, probed or acquired from a plan alone.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_PLAN_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_PLAN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json/record.h"

namespace sn::privhelper::store {

struct PlannedArtifact {
  std::string name;
  std::string kind;
  std::string sha256;
  int64_t size = 0;
  std::string path;  // in privhelper's state_dir: "releases/<source>/<name>"
  bool operator==(const PlannedArtifact&) const = default;
};

struct Plan {
  std::string installation_id;
  int64_t generation = 0;
  std::string specification_digest;
  std::string source;  // the Runtime release
  std::vector<PlannedArtifact> artifacts;  // the specification's, in its order
  bool import_started = false;
  bool operator==(const Plan&) const = default;
  // The same plan but for import_started (the drift check of a resumed preparation).
  bool SameAs(const Plan& o) const;
};

std::string EncodePlan(const Plan& p);
// FailedPrecondition for a torn or foreign record and for a malformed one (a duplicate, unknown,
// missing or mistyped member, a bad value); the message says which (common/json/record.h).
absl::StatusOr<Plan> DecodePlan(std::string_view text);

// An artifact entry of a plan, a collection journal or a final configuration: exactly the
// members name, kind, sha256, size and path, of their types (values unchecked).
absl::StatusOr<PlannedArtifact> TakeArtifact(json::RecordObject& o);
// Refuses (malformed) an entry whose name, digest, size or path is not a stored artifact of
// `source`.
absl::Status CheckArtifact(const json::RecordObject& o, const PlannedArtifact& a,
                           std::string_view source);

// The store path of an artifact of `source`.
std::string ArtifactPath(std::string_view source, std::string_view name);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_PLAN_H_

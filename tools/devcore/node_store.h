// devcore's durable registry: hashed enrollment tokens and enrolled nodes (identity, hashed
// credential, owner epoch, deployment, announced generations, recorded drops), kept in
// DIR/devcore-state.json and rewritten atomically (common/atomic_file.h) on every change,
// before the change is answered or acted on (tools/devcore/README.md). Plaintext tokens and credentials are never stored:
// only their SHA-256, compared in constant time.
//
// Beside the durable part, each node has runtime facts (last health, heartbeats) that live
// only in memory: they describe the current process's observations.
//
// Thread-compatibility: a NodeStore is confined to devcore's event-loop thread.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_NODE_STORE_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_NODE_STORE_H_

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sn::devcore {

// A (generation, specification digest) pair, the unit of retention (§3).
struct GenerationRef {
  int64_t generation = 0;
  std::string specification_digest;
  auto operator<=>(const GenerationRef&) const = default;
};

// What PUT /admin/v1/nodes/{id}/deployment recorded for a node (§3 deployment, without the
// digest: devcore holds exactly one specification per generation).
struct DeploymentRecord {
  int64_t generation = 0;                     // the target
  std::optional<int64_t> serving_generation;  // null leaves the node's serving pin
  bool operator==(const DeploymentRecord&) const = default;
};

struct NodeRecord {
  std::string node_id;  // uuid
  std::string installation_id;
  std::string provider;
  std::string backend_fingerprint;  // recorded at enroll and updated from every hello
  int64_t deployment_generation = 0;
  std::string specification_digest;
  bool generation_management = false;
  int64_t max_active = 1;
  int64_t max_retained = 0;
  std::string credential_sha256;  // empty once revoked
  int64_t owner_epoch = 1;        // positive; only grows
  // Generation management (issues 9, 10). Empty for a node without it.
  std::optional<DeploymentRecord> deployment;  // absent: devcore's default (deployment.h)
  // Generations devcore sent this node as target or serving, ascending. With the enrolled
  // generation they are the generations "announced" to the node.
  std::vector<int64_t> announced_generations;
  std::vector<GenerationRef> dropped;  // durably recorded drops, ascending
};

// In-memory observations of a node (not persisted).
struct NodeRuntime {
  std::optional<std::string> last_health_json;       // health as received, diagnostic normalized
  std::optional<std::string> last_generations_json;  // observations, diagnostics normalized
  std::optional<std::string> last_seen_at;           // RFC 3339 UTC
  int64_t heartbeats = 0;                            // since devcore started
};

class NodeStore {
 public:
  static constexpr std::string_view kStateFileName = "devcore-state.json";

  // Opens the store in `state_dir` (created when missing) and loads the state file when it
  // exists. FailedPrecondition names a torn or foreign state file.
  static absl::StatusOr<std::unique_ptr<NodeStore>> Open(const std::string& state_dir);

  const std::string& state_dir() const { return state_dir_; }

  // Creates a single-use enrollment token, persists its hash and returns the plaintext.
  absl::StatusOr<std::string> IssueEnrollmentToken();

  // Registers `node` (node_id, credential_sha256 and owner_epoch are assigned here) and
  // consumes `token`, in one durable write. Returns the node id and the plaintext credential.
  //   Unauthenticated: unknown or already used token. AlreadyExists: the installation is
  //   enrolled. The store is unchanged on any error.
  struct Enrolled {
    std::string node_id;
    std::string credential;
  };
  absl::StatusOr<Enrolled> Enroll(std::string_view token, NodeRecord node);

  const NodeRecord* Find(std::string_view node_id) const;
  // True iff the node exists, its credential is not revoked and `credential` matches it.
  bool CredentialMatches(std::string_view node_id, std::string_view credential) const;
  // The node whose (unrevoked) credential is `credential`, or null. Compares every node's
  // hash in constant time.
  const NodeRecord* FindByCredential(std::string_view credential) const;

  // Increments the node's owner epoch durably; returns the new epoch. NotFound.
  absl::StatusOr<int64_t> BumpOwnerEpoch(std::string_view node_id);
  // Revokes the node's credential durably. NotFound.
  absl::Status RevokeCredential(std::string_view node_id);
  // Records the non-identity facts of a hello (persisted when they changed). NotFound.
  absl::Status UpdateHelloFacts(std::string_view node_id, std::string_view backend_fingerprint,
                                int64_t max_active, int64_t max_retained);

  // Records the node's deployment durably. NotFound.
  absl::Status SetDeployment(std::string_view node_id, const DeploymentRecord& deployment);
  // Adds `generations` to the node's announced set, durably; writes only when one is new.
  // NotFound.
  absl::Status RecordAnnounced(std::string_view node_id, const std::vector<int64_t>& generations);
  // Records `drop` for the node durably; writes only when it is new. NotFound.
  absl::Status RecordDrop(std::string_view node_id, const GenerationRef& drop);

  // REQUIRES: Find(node_id) != nullptr.
  NodeRuntime& Runtime(std::string_view node_id);
  const NodeRuntime* FindRuntime(std::string_view node_id) const;

  // Every node, ordered by node id.
  std::vector<const NodeRecord*> Nodes() const;

 private:
  explicit NodeStore(std::string state_dir) : state_dir_(std::move(state_dir)) {}
  absl::Status Load(std::string_view text);
  // Applies `change` to the node and persists; restores the record when persisting fails.
  template <typename Fn>
  absl::Status Change(std::string_view node_id, Fn&& change);
  std::string Serialize() const;
  absl::Status Persist() const;

  std::string state_dir_;
  std::vector<std::string> token_hashes_;
  std::map<std::string, NodeRecord, std::less<>> nodes_;
  std::map<std::string, NodeRuntime, std::less<>> runtime_;
};

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_NODE_STORE_H_

// The node's durable files under state_dir (formats in docs/formats.md):
//   node/identity.json     {node_id, installation_id, provider, deployment_generation,
//                           specification_digest, runtime_source, core_origin}; its presence
//                           marks the node enrolled, so `agent enroll` writes it last
//   node/enrollment.json   the same document while an enrollment is unfinished (Core
//                           accepted it, the local steps are not all done); removed after
//                           identity.json is durable
//   node/credential        the node credential (secret), mode 0600, nothing else
//   node/owner_epoch       the highest owner epoch seen, decimal + "\n"
//   node/deployment.json  the deployment pins: local target and serving pin
//                           (generations/pins.h)
//   node/retention.json    what the retention exchange last learned per generation
//                           (advisory, for `agent generations`; generations/retention_file.h)
//   generations/<G>.spec.json  the verified specification document of generation G
//   generations/<G>.progress.json  the last preparation attempt of G: its progress or its end
//                           (generations/progress_file.h)
// Every file goes through the filesystem seam (common/fs): published with PublishReplacing
// (temporary, fsync, rename, fsync of the directory), removed with an unlink and a directory
// fsync, read without following a symlink. The JSON records are read with the strict record
// reader (common/json/record.h); a torn, foreign or malformed file is DataLoss (the message
// says which) instead of a guess.
#ifndef SANDBOX_NODE_AGENT_STATE_STATE_FILES_H_
#define SANDBOX_NODE_AGENT_STATE_STATE_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/fs/fs.h"

namespace sn::agent {

struct NodeIdentity {
  std::string node_id;
  std::string installation_id;
  std::string provider;
  int64_t deployment_generation = 0;
  std::string specification_digest;
  std::string runtime_source;
  std::string core_origin;
  bool operator==(const NodeIdentity&) const = default;
};

class StateFiles {
 public:
  // `fs` (not owned; nullptr: the real filesystem) must outlive this.
  explicit StateFiles(std::string state_dir, fs::Fs* fs = nullptr);

  std::string NodeDir() const;
  std::string GenerationsDir() const;
  std::string IdentityPath() const;
  std::string PendingEnrollmentPath() const;
  std::string CredentialPath() const;
  std::string OwnerEpochPath() const;
  std::string SpecificationPath(int64_t generation) const;
  std::string DeploymentPinsPath() const;
  std::string RetentionPath() const;
  std::string OperationsDir() const;
  std::string ProgressPath(int64_t generation) const;

  // Creates node/ and generations/ (0700) when missing.
  absl::Status EnsureDirs() const;

  absl::Status WriteIdentity(const NodeIdentity& id) const;
  absl::StatusOr<NodeIdentity> ReadIdentity() const;

  // node/enrollment.json (same format as identity.json). Remove is durable (fsyncs node/) and
  // succeeds when the file is absent.
  absl::Status WritePendingEnrollment(const NodeIdentity& id) const;
  absl::StatusOr<NodeIdentity> ReadPendingEnrollment() const;
  absl::Status RemovePendingEnrollment() const;

  absl::Status WriteCredential(const std::string& credential) const;
  // FailedPrecondition when the file is readable by group or others.
  absl::StatusOr<std::string> ReadCredential() const;

  // generations/<G>.spec.json: the verified specification document, as Core served it.
  absl::Status WriteSpecification(int64_t generation, const std::string& bytes) const;

  fs::Fs& filesystem() const { return *fs_; }

 private:
  std::string state_dir_;
  fs::Fs* fs_;
};

// The durable owner epoch (spec §3 welcome). Implementations must make Store durable before
// returning: a crash after Store returns recovers the stored epoch.
class EpochStore {
 public:
  virtual ~EpochStore() = default;
  // The stored epoch, 0 when none was ever stored.
  virtual absl::StatusOr<int64_t> Load() = 0;
  virtual absl::Status Store(int64_t epoch) = 0;
};

// node/owner_epoch on the filesystem seam (`fs`: not owned; nullptr: the real filesystem).
class FileEpochStore final : public EpochStore {
 public:
  explicit FileEpochStore(std::string path, fs::Fs* fs = nullptr);
  absl::StatusOr<int64_t> Load() override;
  absl::Status Store(int64_t epoch) override;

 private:
  std::string path_;
  fs::Fs* fs_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_STATE_STATE_FILES_H_

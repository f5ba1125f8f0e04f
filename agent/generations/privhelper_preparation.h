// PrivhelperPreparation over privhelper's preparation RPCs (proto/privhelper.proto:
// AdoptRelease, BeginPreparation, PutArtifact, FinishPreparation), blocking gRPC calls on the
// calling thread (the preparation worker or `agent enroll`). privhelper's typed answers pass
// through; a call that fails at the gRPC level is provider_unavailable, or
// preparation_cancelled when the attempt's token was cancelled (which cancels the call in
// flight). gRPC headers stay in the .cc.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_PRIVHELPER_PREPARATION_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_PRIVHELPER_PREPARATION_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "agent/generations/prepare_seams.h"
#include "agent/privhelper_rpc/deadlines.h"

namespace sn::agent {

class GrpcPrivhelperPreparation final : public PrivhelperPreparation {
 public:
  // `step_deadline` bounds AdoptRelease and BeginPreparation; `long_deadline` bounds an
  // artifact's stream and FinishPreparation (an image import). Both are backstops: the
  // attempt's own deadline cancels the token first.
  explicit GrpcPrivhelperPreparation(const std::string& socket_path,
                                     absl::Duration step_deadline = kPreparationStepDeadline,
                                     absl::Duration long_deadline = kPreparationLongDeadline);
  ~GrpcPrivhelperPreparation() override;

  StepAnswer AdoptRelease(const ReleaseFiles& files, CancelToken* cancel) override;
  StepAnswer BeginPreparation(int64_t generation, const std::string& specification,
                              const std::string& specification_digest,
                              CancelToken* cancel) override;
  std::unique_ptr<ArtifactUpload> PutArtifact(int64_t generation, const std::string& name,
                                              uint64_t offset, CancelToken* cancel) override;
  StepAnswer FinishPreparation(int64_t generation, CancelToken* cancel) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_PRIVHELPER_PREPARATION_H_

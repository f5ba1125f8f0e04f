// The two sides a preparation talks to, as blocking seams (docs/architecture.md, "Generations
// on the node"): Core's HTTP routes (the configuration route and the console release routes,
// spec/wire.md §6) and privhelper's preparation RPCs (proto/privhelper.proto). Both are
// called only from the thread that runs a preparation (the preparation worker, or `agent
// enroll`), never from the event loop. Production: core_downloads.h and
// privhelper_preparation.h; tests substitute fakes (an in-memory Core, an in-process gRPC
// privhelper). Every blocking call takes the attempt's CancelToken and returns promptly once
// it is cancelled.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_PREPARE_SEAMS_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_PREPARE_SEAMS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/connection/cancel_token.h"
#include "agent/connection/http_client.h"
#include "agent/generations/types.h"

namespace sn::agent {

class CoreDownloads {
 public:
  virtual ~CoreDownloads() = default;
  // GET `target` (path and query); with the node credential when `credentialed` (the
  // configuration route), without it otherwise (the release routes need none). Errors as
  // HttpCall: Unavailable (the bytes did not arrive), ResourceExhausted (a body over
  // `max_bytes`), Cancelled.
  virtual absl::StatusOr<HttpResult> Get(const std::string& target, bool credentialed,
                                         size_t max_bytes, CancelToken* cancel) = 0;
  // A streaming GET without credential, as HttpGetStream; from byte `range_from` on (a
  // `Range: bytes=N-` request) when it is not 0.
  virtual absl::Status GetStream(const std::string& target, uint64_t range_from,
                                 const HttpStreamSink& sink, CancelToken* cancel) = 0;
};

// privhelper's typed answer to one preparation step. A call that did not reach privhelper or
// whose answer was lost is `provider_unavailable`, or `preparation_cancelled` after the
// attempt's token was cancelled.
struct StepAnswer {
  std::optional<Diagnostic> failure;  // nullopt: the step succeeded
  std::optional<HeldState> state;     // the generation's state afterwards, when reported
  std::vector<std::string> missing_artifacts;  // BeginPreparation
  // BeginPreparation: the missing artifacts of which privhelper holds a partial, with its size.
  std::map<std::string, uint64_t> partial_artifacts;
};

// The three metadata files of a release, exactly as served.
struct ReleaseFiles {
  std::string source;
  std::string manifest;
  std::string signature;
  std::string sha256sums;
};

// One PutArtifact stream: header already sent; the bytes follow in order.
class ArtifactUpload {
 public:
  virtual ~ArtifactUpload() = default;
  // Sends `bytes` (split into chunks of at most kMaxPayloadChunkBytes). False when the
  // stream has ended (privhelper answered early, or the transport failed): Finish() then
  // gives privhelper's answer.
  virtual bool Write(std::string_view bytes) = 0;
  // Half-closes the stream (the artifact is complete) and returns privhelper's answer.
  virtual StepAnswer Finish() = 0;
  // Cancels the stream without a clean end, so privhelper publishes nothing of it. Used when
  // the agent refused the bytes (checksum, size) or was cancelled.
  virtual void Abort() = 0;
  // The download broke: sends what is gathered, then `suspend` and the half-close, so that
  // privhelper keeps every byte sent as the artifact's partial (publishing nothing), and
  // returns its answer.
  virtual StepAnswer Suspend() = 0;
};

class PrivhelperPreparation {
 public:
  virtual ~PrivhelperPreparation() = default;
  virtual StepAnswer AdoptRelease(const ReleaseFiles& files, CancelToken* cancel) = 0;
  virtual StepAnswer BeginPreparation(int64_t generation, const std::string& specification,
                                      const std::string& specification_digest,
                                      CancelToken* cancel) = 0;
  // Opens the stream and sends its header. Never null. `offset`: where the bytes that follow
  // start in the artifact (0, or the size of the partial BeginPreparation reported).
  virtual std::unique_ptr<ArtifactUpload> PutArtifact(int64_t generation,
                                                      const std::string& name, uint64_t offset,
                                                      CancelToken* cancel) = 0;
  virtual StepAnswer FinishPreparation(int64_t generation, CancelToken* cancel) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_PREPARE_SEAMS_H_

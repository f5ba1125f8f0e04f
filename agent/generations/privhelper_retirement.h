// privhelper's retirement RPCs (proto/privhelper.proto, "Retirement") for the agent:
//   - GrpcGenerationCollector: the production GenerationCollector (collector.h). One blocking
//     CollectGeneration at a time on a worker thread of its own; the result is posted to the
//     event loop. Cancel() cancels the gRPC call (privhelper then refuses before its point of
//     no return: the caller left). Destroying it cancels the call in flight and joins the
//     thread; nothing is posted after that.
//   - ListGenerationsOnce: the blocking read-only view `agent generations` prints (nothing is
//     locked or changed by it, on either side).
// gRPC headers stay in the .cc.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_PRIVHELPER_RETIREMENT_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_PRIVHELPER_RETIREMENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/generations/collector.h"
#include "agent/generations/types.h"
#include "agent/privhelper_rpc/deadlines.h"

namespace sn::agent {

class GrpcGenerationCollector final : public GenerationCollector {
 public:
  // `post` hands a closure to the event loop (thread-safe). `deadline` bounds one call: a
  // collection verifies and removes files, so it is generous.
  GrpcGenerationCollector(std::string socket_path,
                          std::function<void(std::function<void()>)> post,
                          absl::Duration deadline = kCollectDeadline);
  ~GrpcGenerationCollector() override;

  std::unique_ptr<CollectCall> Collect(const GenerationRef& ref,
                                       std::function<void(CollectResult)> done) override;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What privhelper owns about one generation (ListGenerations' GenerationDetail).
struct PrivhelperGenerationDetail {
  GenerationReport report;
  bool has_progress = false;  // PREPARING: the plan's artifacts in the store
  int artifacts_stored = 0;
  int artifacts_total = 0;
  int64_t bytes_stored = 0;
  int64_t bytes_total = 0;
  bool import_started = false;
  std::vector<int> helper_pids;    // native helpers not yet reaped
  int calls_in_flight = 0;         // Execute calls on it inside privhelper
  std::vector<int> lease_holders;  // pids holding a flock on its lease (/proc/locks)
  int collect_files_left = 0;      // COLLECTING
  bool native_done = false;        // COLLECTING
  std::string last_collection_error;
};

struct PrivhelperGenerations {
  std::vector<PrivhelperGenerationDetail> generations;
  bool truncated = false;
  bool collection_running = false;
  bool preparation_running = false;
};

// Unavailable (with gRPC's text, for the operator) when privhelper cannot be reached.
absl::StatusOr<PrivhelperGenerations> ListGenerationsOnce(const std::string& socket_path,
                                                          absl::Duration deadline);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_PRIVHELPER_RETIREMENT_H_

// OperationExecutor over privhelper's Execute RPC (proto/privhelper.proto). Calls are gRPC async
// calls on one completion queue (many in flight at once), served by one completion thread that
// posts each outcome back to the event loop. (The callback API cost about twice the CPU per
// call in gRPC 1.51: its "nexting" threads; see docs/performance.md.)
// gRPC headers stay in the .cc.
#ifndef SANDBOX_NODE_AGENT_PRIVHELPER_EXECUTOR_H_
#define SANDBOX_NODE_AGENT_PRIVHELPER_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "agent/executor.h"

namespace sn::agent {

struct PrivhelperExecutorOptions {
  std::string socket_path;
  std::string specification_digest;  // of the enrolled generation (create_settled receipts)
  std::string installation_id;       // the enrolled installation; privhelper checks it
  // create's image name -> the native image reference privhelper expects (Docker: the first
  // identity of that image in the generation's specification).
  std::map<std::string, std::string> native_images;
  int64_t max_active = 1;
  int64_t max_retained = 0;
  // Added to the request's remaining budget for the gRPC deadline (the agent cancels at the
  // budget itself; this only bounds a call that never returns).
  // Must exceed privhelper's HelperManager::kFinalOutcomeGrace (3 s).
  absl::Duration deadline_grace = absl::Seconds(10);
};

class PrivhelperExecutor final : public OperationExecutor {
 public:
  PrivhelperExecutor(PrivhelperExecutorOptions options,
                     std::function<void(std::function<void()>)> post);
  ~PrivhelperExecutor() override;
  std::unique_ptr<Execution> Execute(const wire::Request& request,
                                     absl::Duration remaining_budget,
                                     std::function<void(ExecOutcome)> done) override;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_PRIVHELPER_EXECUTOR_H_

// OperationExecutor over privhelper's Execute RPC (proto/privhelper.proto). Calls are gRPC async
// calls on one completion queue (many in flight at once) that the event loop itself polls when
// privhelper's socket is ready: no completion thread, no hand-off (privhelper_executor.cc). The
// executor connects the socket itself and makes a direct channel on it (both with
// agent/privhelper_rpc/channel.h, privhelper's one channel); when privhelper hangs up, the
// next call connects anew (a call that cannot connect is `unavailable`: nothing was sent).
// privhelper's typed refusals (`refusal`: arguments, a generation it does not hold, admission,
// another installation) are logged here with the request id; their error_code is the answer.
// A call is never cancelled before its deadline, the remaining budget plus deadline_grace
// (executor.h); only destroying the executor (agent shutdown) cancels the calls in flight.
// gRPC and asio headers stay in the .cc.
#ifndef SANDBOX_NODE_AGENT_REQUESTS_PRIVHELPER_EXECUTOR_H_
#define SANDBOX_NODE_AGENT_REQUESTS_PRIVHELPER_EXECUTOR_H_

#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "agent/privhelper_rpc/deadlines.h"
#include "agent/requests/executor.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace sn::agent {

struct PrivhelperExecutorOptions {
  std::string socket_path;
  // The specification digest of a held generation, for create_settled receipts (the
  // generation gate's DigestOf); called on the event loop when a call starts. A generation
  // without one gets no receipt (Core then treats the failed create as unconfirmed).
  std::function<std::optional<std::string>(int64_t generation)> digest_of;
  std::string installation_id;       // the enrolled installation; privhelper checks it
  // Added to the request's remaining budget for the gRPC deadline (why it exceeds privhelper's
  // final-outcome grace: agent/privhelper_rpc/deadlines.h).
  absl::Duration deadline_grace = kExecuteDeadlineGrace;
};

class PrivhelperExecutor final : public OperationExecutor {
 public:
  // Execute and the destructor run on the thread that runs `io` (or after it stopped).
  PrivhelperExecutor(PrivhelperExecutorOptions options, boost::asio::io_context& io);
  ~PrivhelperExecutor() override;
  void Execute(const wire::Request& request, absl::Duration remaining_budget,
               std::function<void(ExecOutcome)> done) override;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_REQUESTS_PRIVHELPER_EXECUTOR_H_

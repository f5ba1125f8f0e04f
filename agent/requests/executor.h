// The seam between the request queue (request_queue.h) and whatever runs provider operations
// natively (privhelper_executor.h: privhelper's Execute RPC). Single-threaded: Execute is
// called on the agent's event loop and `done` runs there.
//
// Budgets and cancellation. The queue anchors a request's budget on receipt and answers Core
// itself when it ends (`unavailable` before the start, `uncertain` after). An executor is
// never asked to cancel a started operation: the agent cannot stop native work safely, and
// tearing the call down would lose its final outcome, which the queue records for observe.
// Whoever runs the operation anchors the remaining budget it is handed and stops the native
// work when it ends — privhelper anchors `budget_ms` on receipt, signals the native helper at
// expiry and still answers with the helper's final outcome (docs/protocol.md 12b) — and the
// executor bounds the wait for that answer (the remaining budget plus a grace) so that `done`
// always runs.
#ifndef SANDBOX_NODE_AGENT_REQUESTS_EXECUTOR_H_
#define SANDBOX_NODE_AGENT_REQUESTS_EXECUTOR_H_

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include "absl/time/time.h"
#include "common/wire/frames.h"

namespace sn::agent {

// What a native call produced: a result (success) or an error code with its evidence.
struct ExecOutcome {
  std::optional<wire::Result> result;
  std::optional<std::string> error_code;
  std::optional<wire::CreateSettled> create_settled;
  std::optional<wire::Unsupported> unsupported;
};

// The sandbox an operation names ("" for observe).
inline std::string SandboxOf(const wire::Arguments& args) {
  return std::visit(
      [](const auto& a) -> std::string {
        if constexpr (std::is_same_v<std::decay_t<decltype(a)>, wire::ObserveArgs>) {
          return "";
        } else {
          return a.sandbox_id;
        }
      },
      args);
}

class OperationExecutor {
 public:
  virtual ~OperationExecutor() = default;
  // Starts `request` (never observe: the agent answers observe from its record) with what is
  // left of its budget. `done` runs exactly once with the final outcome, on the event loop,
  // never inside Execute, and also when the budget has ended by then (see above).
  virtual void Execute(const wire::Request& request, absl::Duration remaining_budget,
                       std::function<void(ExecOutcome)> done) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_REQUESTS_EXECUTOR_H_

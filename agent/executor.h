// The seam between the request queue and whatever runs provider operations natively
// (privhelper's Execute RPC). Everything runs on the agent's event loop.
#ifndef SANDBOX_NODE_AGENT_EXECUTOR_H_
#define SANDBOX_NODE_AGENT_EXECUTOR_H_

#include <functional>
#include <memory>
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

class Execution {
 public:
  virtual ~Execution() = default;
  // Signals the native helper to stop (budget expired). `done` still runs with the final
  // outcome, later.
  virtual void Cancel() = 0;
};

class OperationExecutor {
 public:
  virtual ~OperationExecutor() = default;
  // Starts `request` (never observe: the agent answers observe from its record) with what is
  // left of its budget. `done` runs exactly once, on the event loop, never inside Execute.
  virtual std::unique_ptr<Execution> Execute(const wire::Request& request,
                                             absl::Duration remaining_budget,
                                             std::function<void(ExecOutcome)> done) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_EXECUTOR_H_

// The seam to privhelper's CollectGeneration (proto/privhelper.proto, "Retirement"): one
// collection at a time, off the event loop (privhelper_retirement.h runs the blocking gRPC
// call on a worker thread). privhelper re-checks everything it owns (installation lock,
// exclusive lease, calls in flight, helpers until waitpid, the caller still connected).
// Single-threaded interface: Collect is called on the event loop and `done` runs there,
// exactly once, never inside Collect, also after Cancel.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_COLLECTOR_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_COLLECTOR_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "agent/generations/types.h"
#include "common/diagnostics.h"

namespace sn::agent {

enum class CollectOutcome {
  kDropped,  // dropped now or before
  kHeld,     // something holds it (the reason says what); nothing changed: a new grant later
  kRefused,  // a check refused (diagnostic, reason); kept as it is
  kUnknown,  // privhelper records no such generation
  kFailed,   // an I/O failure, or privhelper unreachable; a durable journal resumes later
};

inline std::string_view CollectOutcomeName(CollectOutcome o) {
  switch (o) {
    case CollectOutcome::kDropped: return "dropped";
    case CollectOutcome::kHeld: return "held";
    case CollectOutcome::kRefused: return "refused";
    case CollectOutcome::kUnknown: return "unknown";
    case CollectOutcome::kFailed: return "failed";
  }
  return "failed";
}

struct CollectResult {
  CollectOutcome outcome = CollectOutcome::kFailed;
  std::optional<Diagnostic> diagnostic;  // with kRefused
  std::string reason;                    // for operators and logs; never parsed
  std::optional<HeldState> state;        // privhelper's state of it afterwards, when known
};

class CollectCall {
 public:
  virtual ~CollectCall() = default;
  // The granting connection ended: cancels the call (privhelper refuses a caller that left
  // before its point of no return). `done` still runs.
  virtual void Cancel() = 0;
};

class GenerationCollector {
 public:
  virtual ~GenerationCollector() = default;
  virtual std::unique_ptr<CollectCall> Collect(const GenerationRef& ref,
                                               std::function<void(CollectResult)> done) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_COLLECTOR_H_

// The seam between the request queue (request_queue.h) and generation management
// (generations/manager.h): which generation a request runs on (spec/wire.md §4). A request
// names a generation: one the node does not hold answers `unconfirmed`; `create` and a
// `resume` that is not reconciliation-only also need it ready locally, else `unconfirmed`;
// a create whose image the generation's specification does not name is `invalid`. A node
// without generation management holds only its enrolled generation. Single-threaded: called
// on the agent's event loop.
#ifndef SANDBOX_NODE_AGENT_REQUESTS_GENERATION_GATE_H_
#define SANDBOX_NODE_AGENT_REQUESTS_GENERATION_GATE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/wire/frames.h"

namespace sn::agent {

enum class GateAnswer { kRun, kUnconfirmed, kInvalid };

class GenerationGate {
 public:
  virtual ~GenerationGate() = default;
  // `request` passed the request layer (no request_error).
  virtual GateAnswer Admit(const wire::Request& request) = 0;
  // The specification digest of a held generation (create_settled receipts), or nullopt.
  virtual std::optional<std::string> DigestOf(int64_t generation) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_REQUESTS_GENERATION_GATE_H_

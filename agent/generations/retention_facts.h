// What the retention decisions (retention.h) need from generation management (manager.h),
// and what they tell it: which held records are candidates for the retention exchange, which
// local reference keeps a generation right now, and the collections that start and end.
// Single-threaded: every method runs on the agent's event loop.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_RETENTION_FACTS_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_RETENTION_FACTS_H_

#include <optional>
#include <string>
#include <vector>

#include "agent/generations/types.h"

namespace sn::agent {

class RetentionFacts {
 public:
  virtual ~RetentionFacts() = default;
  // Every record privhelper reported that nothing local wants: READY, FAILED, PREPARING plans
  // and unfinished COLLECTING journals whose number is neither the target nor the serving pin
  // and that no preparation is scheduled for (never DROPPED). Generation order.
  virtual std::vector<GenerationRef> RetentionCandidates() const = 0;
  // The local reference that keeps `ref` at this moment ("target", "serving pin",
  // "preparation"), or nullopt when the agent's generation management holds none.
  virtual std::optional<std::string> LocalReference(const GenerationRef& ref) const = 0;
  // A collection of `ref` starts: requests naming it answer `unconfirmed` until it ends.
  virtual void CollectionStarted(const GenerationRef& ref) = 0;
  // It ended; `state` is privhelper's state of the generation afterwards, when it said.
  virtual void CollectionEnded(const GenerationRef& ref, std::optional<HeldState> state) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_RETENTION_FACTS_H_

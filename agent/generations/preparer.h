// The seam between the preparation scheduler (on the event loop) and whatever runs one
// preparation attempt (worker_preparer.h: RunPreparation on a worker thread). Tests use a
// fake that completes attempts when told to.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_PREPARER_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_PREPARER_H_

#include <functional>
#include <memory>

#include "agent/generations/types.h"

namespace sn::agent {

class PreparationAttempt {
 public:
  virtual ~PreparationAttempt() = default;
  // Asks the attempt to stop as soon as it can (its downloads and privhelper calls are
  // interrupted). It still ends through `done`, perhaps even with success when the request
  // came too late.
  virtual void Cancel() = 0;
};

class Preparer {
 public:
  virtual ~Preparer() = default;
  // Starts one attempt of `job`. `progress` and `done` run on the event loop, never inside
  // Start; `done` runs exactly once. The handle must stay alive until `done` has run (the
  // scheduler keeps it). At most one attempt runs at a time (the scheduler serializes).
  virtual std::unique_ptr<PreparationAttempt> Start(
      const PreparationJob& job, std::function<void(const PreparationProgress&)> progress,
      std::function<void(PreparationOutcome)> done) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_PREPARER_H_

// The production Preparer: runs RunPreparation (prepare.h) on a thread of its own and posts
// progress and the outcome back to the event loop. One attempt at a time (the scheduler
// serializes; a second Start while one runs waits its turn on the thread). Cancel() cancels
// the attempt's token, which interrupts its download or privhelper call in progress.
// Destroying the preparer cancels the attempt in progress and joins the thread; nothing is
// posted after that.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_WORKER_PREPARER_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_WORKER_PREPARER_H_

#include <functional>
#include <memory>

#include "agent/generations/prepare.h"
#include "agent/generations/preparer.h"

namespace sn::agent {

class WorkerPreparer final : public Preparer {
 public:
  // `context`'s seams are used on the worker thread only; `post` hands a closure to the
  // event loop (thread-safe).
  WorkerPreparer(PreparationContext context, std::function<void(std::function<void()>)> post);
  ~WorkerPreparer() override;

  std::unique_ptr<PreparationAttempt> Start(
      const PreparationJob& job, std::function<void(const PreparationProgress&)> progress,
      std::function<void(PreparationOutcome)> done) override;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_WORKER_PREPARER_H_

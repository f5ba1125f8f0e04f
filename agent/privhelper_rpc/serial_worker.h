// One thread that runs closures in the order they were handed over: where the agent's
// blocking privhelper calls run (privhelper_client.h's probes, the collector of
// generations/privhelper_retirement.h), so the event loop never blocks on gRPC. Run() may be
// called from any thread. Destroying the worker drops the closures not yet started, waits
// for the one running and joins the thread.
#ifndef SANDBOX_NODE_AGENT_PRIVHELPER_RPC_SERIAL_WORKER_H_
#define SANDBOX_NODE_AGENT_PRIVHELPER_RPC_SERIAL_WORKER_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sn::agent {

class SerialWorker {
 public:
  SerialWorker();
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  void Run(std::function<void()> fn);

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started after everything it uses
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_PRIVHELPER_RPC_SERIAL_WORKER_H_

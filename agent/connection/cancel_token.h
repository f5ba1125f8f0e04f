// Cancellation of blocking work that runs off the event loop (a preparation's HTTP downloads
// and privhelper calls). The event loop calls Cancel(); the worker checks cancelled() between
// steps, and each blocking call in progress registers a hook that interrupts it (io_context
// stop, grpc::ClientContext::TryCancel), so a cancelled attempt ends promptly instead of at
// its next step. Thread-safe: Cancel() and the registrations may race from any threads.
#ifndef SANDBOX_NODE_AGENT_CONNECTION_CANCEL_TOKEN_H_
#define SANDBOX_NODE_AGENT_CONNECTION_CANCEL_TOKEN_H_

#include <cstdint>
#include <functional>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sn::agent {

class CancelToken {
 public:
  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // Marks the token cancelled and runs every registered hook once (idempotent). Hooks run
  // under the token's lock: they must be short, non-blocking and must not call back into it.
  void Cancel();
  bool cancelled() const;

  // While alive, `hook` runs on Cancel() (at once, inside the constructor, when the token is
  // already cancelled). After the destructor returns the hook never runs again, so it may
  // capture the blocking call's locals. A null token makes a registration that does nothing.
  class Registration {
   public:
    Registration(CancelToken* token, std::function<void()> hook);
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    CancelToken* token_;
    uint64_t id_ = 0;
  };

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::function<void()>> hooks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_CANCEL_TOKEN_H_

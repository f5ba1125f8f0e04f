// The one place every RPC is admitted (OpenSSH monitor style): the permit table (permits.h),
// privhelper's current phase, and the per-call peer check. Fail-closed.
//
//  - A peer that cannot be verified as the admitted agent connection: PERMISSION_DENIED.
//  - A method that is not in the table, or one its row forbids in the current phase: a
//    violation. It is logged once per connection and the connection is dropped (both ways),
//    so every call on it fails; the caller must reconnect. PERMISSION_DENIED for the call.
//
// Thread-safe: called from gRPC's handler threads.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_MONITOR_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_MONITOR_H_

#include <atomic>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "privhelper/rpc/peer.h"
#include "privhelper/rpc/permits.h"

namespace sn::privhelper {

class Monitor {
 public:
  // REQUIRES: `peers` outlives the Monitor.
  explicit Monitor(AdmittedPeers* peers) : peers_(peers) {}

  void SetPhase(Phase p) { phase_.store(p); }
  Phase phase() const { return phase_.load(); }

  // OK iff `rpc` is permitted in the current phase and `grpc_peer` (ServerContext::peer()) is
  // a verified admitted agent connection. See the file comment for the refusals.
  absl::Status Admit(Rpc rpc, std::string_view grpc_peer) ABSL_LOCKS_EXCLUDED(mu_);

  // A call of `method`, which is not in the table at all (the catch-all generic service).
  absl::Status RefuseUnknownMethod(std::string_view method, std::string_view grpc_peer)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Violations seen so far (tests, logs).
  int64_t violations() const { return violations_.load(); }

 private:
  absl::Status Violation(std::string_view method, std::string_view grpc_peer,
                         std::string_view why) ABSL_LOCKS_EXCLUDED(mu_);

  AdmittedPeers* const peers_;
  std::atomic<Phase> phase_{Phase::kStarting};
  std::atomic<int64_t> violations_{0};
  absl::Mutex mu_;
  // Peers dropped for a violation whose later calls are refused without another log line
  // (bounded: cleared when it grows past a few entries).
  absl::flat_hash_set<std::string> dropped_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_MONITOR_H_

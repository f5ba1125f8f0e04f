// The one place every RPC is checked (OpenSSH monitor style): a fixed table of RPCs, each
// permitted only in certain server states, and the per-call peer check. Fail-closed: an RPC
// not in the table, a state not listed for it, or a peer that cannot be verified is refused.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_MONITOR_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_MONITOR_H_

#include <atomic>
#include <string_view>

#include "absl/status/status.h"
#include "privhelper/rpc/peer.h"

namespace sn::privhelper {

enum class ServerState { kStarting = 0, kServing = 1, kStopping = 2 };

enum class Rpc { kProbe, kExecute };

struct RpcRule {
  Rpc rpc;
  std::string_view name;
  bool allowed_starting;
  bool allowed_serving;
  bool allowed_stopping;
};

// The dispatch table. Adding an RPC means adding a row here; nothing else admits a call.
inline constexpr RpcRule kRpcTable[] = {
    {Rpc::kProbe, "Probe", /*starting=*/false, /*serving=*/true, /*stopping=*/false},
    {Rpc::kExecute, "Execute", /*starting=*/false, /*serving=*/true, /*stopping=*/false},
};

class Monitor {
 public:
  // REQUIRES: `peers` outlives the Monitor.
  explicit Monitor(const AdmittedPeers* peers) : peers_(peers) {}

  void SetState(ServerState s) { state_.store(static_cast<int>(s)); }
  ServerState state() const { return static_cast<ServerState>(state_.load()); }

  // OK iff `rpc` is in the table, allowed in the current state, and `grpc_peer` (from
  // ServerContext::peer()) is a verified admitted agent connection. Refusals are logged and
  // returned as PermissionDenied (peer) or Unavailable (state).
  absl::Status Admit(Rpc rpc, std::string_view grpc_peer) const;

 private:
  const AdmittedPeers* const peers_;
  std::atomic<int> state_{static_cast<int>(ServerState::kStarting)};
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_MONITOR_H_

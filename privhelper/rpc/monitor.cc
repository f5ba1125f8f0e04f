#include "privhelper/rpc/monitor.h"

#include <string>

#include "common/log.h"

namespace sn::privhelper {

absl::Status Monitor::Admit(Rpc rpc, std::string_view grpc_peer) const {
  const RpcRule* rule = nullptr;
  for (const RpcRule& r : kRpcTable) {
    if (r.rpc == rpc) rule = &r;
  }
  if (rule == nullptr) {
    LogError("refused rpc: not in the dispatch table");
    return absl::PermissionDeniedError("rpc not permitted");
  }
  absl::Status peer = peers_->Verify(grpc_peer);
  if (!peer.ok()) {
    LogWarning("refused rpc: peer check failed",
               {{"rpc", rule->name}, {"peer", grpc_peer}, {"reason", std::string(peer.message())}});
    return absl::PermissionDeniedError("peer not permitted");
  }
  ServerState s = state();
  bool allowed = (s == ServerState::kStarting && rule->allowed_starting) ||
                 (s == ServerState::kServing && rule->allowed_serving) ||
                 (s == ServerState::kStopping && rule->allowed_stopping);
  if (!allowed) {
    LogWarning("refused rpc: not permitted in this state",
               {{"rpc", rule->name}, {"state", static_cast<int>(s)}});
    return absl::UnavailableError("rpc not permitted in this state");
  }
  return absl::OkStatus();
}

}  // namespace sn::privhelper

#include "privhelper/rpc/monitor.h"

#include "common/log.h"

namespace sn::privhelper {
namespace {

constexpr size_t kMaxRememberedDrops = 64;

}  // namespace

std::string_view PhaseName(Phase p) {
  switch (p) {
    case Phase::kStarting: return "starting";
    case Phase::kUnregistered: return "unregistered";
    case Phase::kServing: return "serving";
    case Phase::kStopping: return "stopping";
  }
  return "?";
}

absl::Status Monitor::Violation(std::string_view method, std::string_view grpc_peer,
                                std::string_view why) {
  violations_.fetch_add(1);
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    if (dropped_.size() >= kMaxRememberedDrops) dropped_.clear();
    first = dropped_.insert(std::string(grpc_peer)).second;
  }
  // Logged before the drop, so whoever sees the connection go can find the reason logged.
  if (first) {
    LogError("permit-table violation: dropping the caller's connection",
             {{"method", method}, {"why", why}, {"peer", grpc_peer}});
  }
  if (!peers_->Disconnect(grpc_peer)) {
    LogWarning("the violating connection was already gone", {{"peer", grpc_peer}});
  }
  return absl::PermissionDeniedError("call not permitted; connection dropped");
}

absl::Status Monitor::Admit(Rpc rpc, std::string_view grpc_peer) {
  const Permit* permit = FindPermit(rpc);
  if (permit == nullptr) return Violation("?", grpc_peer, "not in the permit table");
  absl::Status peer = peers_->Verify(grpc_peer);
  if (!peer.ok()) {
    bool quiet = false;
    {
      absl::MutexLock lock(&mu_);
      quiet = dropped_.contains(std::string(grpc_peer));
    }
    if (!quiet) {
      LogWarning("refused rpc: peer check failed", {{"method", permit->method},
                                                    {"peer", grpc_peer},
                                                    {"reason", std::string(peer.message())}});
    }
    return absl::PermissionDeniedError("peer not permitted");
  }
  const Phase p = phase();
  if (!permit->AllowedIn(p)) {
    return Violation(permit->method, grpc_peer,
                     std::string("not permitted while privhelper is ") + std::string(PhaseName(p)));
  }
  return absl::OkStatus();
}

absl::Status Monitor::RefuseUnknownMethod(std::string_view method, std::string_view grpc_peer) {
  // Bound what a hostile method name can put into the log.
  const std::string_view shown = method.substr(0, 128);
  return Violation(shown, grpc_peer, "not in the permit table");
}

}  // namespace sn::privhelper

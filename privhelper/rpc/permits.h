// privhelper's permit table (after OpenSSH's monitor): the complete list of RPCs the agent may
// call and the phases of privhelper's life in which each is allowed. It is the dispatch:
// server.cc registers one handler per row under the row's method name and nothing else, and
// each handler runs only after Monitor::Admit passed it by its row; before serving, every row is
// checked against proto/privhelper.proto's service (permits_proto.h). Nothing else admits a
// call. A call of a method that is not in this table, or in a phase its row does not allow, is
// a violation: logged once and the caller's connection dropped (monitor.h). Argument refusals,
// unheld generations and admission refusals are typed answers instead (server.cc), on a
// connection that stays up.
//
// What each RPC checks against state privhelper owns is listed in docs/security.md ("The
// surface on one screen"); keep that table and this one in step.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_PERMITS_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_PERMITS_H_

#include <cstdint>
#include <string_view>

namespace sn::privhelper {

// privhelper's lifecycle. kStarting: the socket exists, state is still being loaded.
// kUnregistered: serving, but no generation is ready yet (before `agent enroll` prepared
// one). kServing: a generation is ready. kStopping: SIGTERM received, in-flight calls finish.
enum class Phase : uint8_t { kStarting, kUnregistered, kServing, kStopping };

std::string_view PhaseName(Phase p);

enum class Rpc : uint8_t {
  kProbe,
  kAdoptRelease,
  kBeginPreparation,
  kPutArtifact,
  kFinishPreparation,
  kCollectGeneration,
  kListGenerations,
  kExecute,
};

struct Permit {
  Rpc rpc;
  std::string_view method;  // the full gRPC method name
  bool in_starting;
  bool in_unregistered;
  bool in_serving;
  bool in_stopping;

  bool AllowedIn(Phase p) const {
    switch (p) {
      case Phase::kStarting: return in_starting;
      case Phase::kUnregistered: return in_unregistered;
      case Phase::kServing: return in_serving;
      case Phase::kStopping: return in_stopping;
    }
    return false;
  }
};

// clang-format off
inline constexpr Permit kPermits[] = {
//  rpc                      method                                               start  unreg  serve  stop
  {Rpc::kProbe,              "/sn.privhelper.v1.PrivHelper/Probe",                false, true,  true,  false},
  {Rpc::kAdoptRelease,       "/sn.privhelper.v1.PrivHelper/AdoptRelease",         false, true,  true,  false},
  {Rpc::kBeginPreparation,   "/sn.privhelper.v1.PrivHelper/BeginPreparation",     false, true,  true,  false},
  {Rpc::kPutArtifact,        "/sn.privhelper.v1.PrivHelper/PutArtifact",          false, true,  true,  false},
  {Rpc::kFinishPreparation,  "/sn.privhelper.v1.PrivHelper/FinishPreparation",    false, true,  true,  false},
  {Rpc::kCollectGeneration,  "/sn.privhelper.v1.PrivHelper/CollectGeneration",    false, true,  true,  false},
  {Rpc::kListGenerations,    "/sn.privhelper.v1.PrivHelper/ListGenerations",      false, true,  true,  false},
  {Rpc::kExecute,            "/sn.privhelper.v1.PrivHelper/Execute",              false, false, true,  false},
};
// clang-format on

// The row of `rpc`, or nullptr.
constexpr const Permit* FindPermit(Rpc rpc) {
  for (const Permit& p : kPermits) {
    if (p.rpc == rpc) return &p;
  }
  return nullptr;
}

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_PERMITS_H_

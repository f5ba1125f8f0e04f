// privhelper's server: the gRPC service (proto/privhelper.proto) behind its own accept loop
// (listener.h), the permit table (permits.h, monitor.h), privhelper's own checks of every
// argument (execute_check.h) and admission control (admission.h).
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_SERVER_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "privhelper/retirement_hooks.h"
#include "privhelper/config.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/importer.h"
#include "privhelper/provider.h"
#include "privhelper/rpc/admission.h"
#include "privhelper/rpc/listener.h"
#include "privhelper/rpc/sandbox_fence.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/release_store.h"

namespace sn::privhelper {

struct ServerOptions {
  std::string socket_path;
  uid_t agent_uid = 0;
  // Runs Execute calls.
  std::shared_ptr<HelperManager> helpers;
  // The installation identity privhelper owns (store/installation.h); Probe reports it and
  // every Execute must name it.
  std::string installation_id;
  // The generations privhelper holds, its release store, and the backend's image store for
  // preparation. REQUIRES: each outlives the server.
  store::GenerationStore* generations = nullptr;
  store::ReleaseStore* releases = nullptr;
  ImageImporter* importer = nullptr;
  // The backend's additions to collection (backend.h). May be empty.
  RetirementHooks retirement;
  // privhelper's configured capacity (config.h), enforced on create/resume and reported by
  // Probe.
  int64_t max_active = kDefaultMaxActive;
  int64_t max_retained = kDefaultMaxRetained;
  // The sandbox fence (sandbox_fence.h), opened on privhelper's state directory. Required in
  // production (privhelper's Main always opens one); null only in tests of other rules.
  SandboxFence* fence = nullptr;
  // Admission bounds (tests lower them).
  int max_concurrent_execute = kMaxConcurrentExecute;
  size_t max_inflight_request_bytes = kMaxInflightRequestBytes;
};

class PrivHelperServer {
 public:
  // Creates the socket, starts gRPC and the accept loop, and enters the unregistered or the
  // serving phase (serving when a generation is held).
  // REQUIRES: the socket's parent directory exists.
  // `listener`: the socket, when the caller bound it already (privhelper's Main binds it before
  // any thread starts, then drops CAP_SETGID); else it is created here.
  static absl::StatusOr<std::unique_ptr<PrivHelperServer>> Start(
      const ServerOptions& options, std::unique_ptr<Provider> provider,
      std::unique_ptr<Listener> listener = nullptr);
  ~PrivHelperServer();

  // Stops accepting, refuses new calls, and shuts gRPC down (in-flight calls get `grace`).
  // Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

  // Permit-table violations so far (tests).
  int64_t violations() const;

 private:
  struct Impl;
  explicit PrivHelperServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_SERVER_H_

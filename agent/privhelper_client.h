// The agent's client of privhelper (proto/privhelper.proto) over its unix socket. gRPC calls
// block, so they run on a worker thread and their results are posted back to the event loop.
// gRPC headers stay in the .cc.
#ifndef SANDBOX_NODE_AGENT_PRIVHELPER_CLIENT_H_
#define SANDBOX_NODE_AGENT_PRIVHELPER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/diagnostics.h"

namespace sn::agent {

struct ProbeOutcome {
  bool ready = false;
  Diagnostic diagnostic = Diagnostic::kProviderUnavailable;  // meaningful when !ready
  std::string backend_fingerprint;
  std::string provider;
  std::string installation_id;  // the identity privhelper owns
};

// Maps privhelper's proto Diagnostic number to the §7 code; unknown or unspecified numbers
// become provider_unavailable.
Diagnostic DiagnosticFromProto(int proto_value);

// One blocking Probe call. Unavailable (with the gRPC error text, for the local log) when
// privhelper cannot be reached or refuses the call.
absl::StatusOr<ProbeOutcome> ProbeOnce(const std::string& socket_path, int64_t generation,
                                       absl::Duration deadline);

// Asynchronous probing for the event loop.
class ProviderProber {
 public:
  virtual ~ProviderProber() = default;
  // `done` runs on the event loop with the outcome or the reason privhelper was unreachable.
  virtual void Probe(int64_t generation,
                     std::function<void(absl::StatusOr<ProbeOutcome>)> done) = 0;
};

// Runs ProbeOnce on its own worker thread; `post` hands a closure to the event loop.
class GrpcProber final : public ProviderProber {
 public:
  GrpcProber(std::string socket_path, absl::Duration deadline,
             std::function<void(std::function<void()>)> post);
  ~GrpcProber() override;  // joins the worker after the call in progress
  void Probe(int64_t generation,
             std::function<void(absl::StatusOr<ProbeOutcome>)> done) override;

 private:
  class Worker;
  std::string socket_path_;
  absl::Duration deadline_;
  std::function<void(std::function<void()>)> post_;
  std::unique_ptr<Worker> worker_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_PRIVHELPER_CLIENT_H_

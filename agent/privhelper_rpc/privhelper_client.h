// The agent's control call to privhelper (proto/privhelper.proto) over its unix socket: Probe.
// (Execute has its own client, agent/requests/privhelper_executor.h; the preparation and retirement
// RPCs theirs, agent/generations/privhelper_preparation.h and privhelper_retirement.h; every one
// makes its channel with channel.h.) gRPC calls block, so the blocking form serves `agent enroll`
// and the asynchronous form runs it on one worker thread and posts each result back to the event
// loop. gRPC headers stay in the .cc.
#ifndef SANDBOX_NODE_AGENT_PRIVHELPER_RPC_PRIVHELPER_CLIENT_H_
#define SANDBOX_NODE_AGENT_PRIVHELPER_RPC_PRIVHELPER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/connection/health.h"
#include "agent/generations/types.h"
#include "agent/privhelper_rpc/serial_worker.h"
#include "common/diagnostics.h"

namespace sn::agent {


// This installation's sandboxes as privhelper counted them (complete, label-filtered inventory).
struct SandboxCounts {
  int64_t active = 0;
  int64_t retained = 0;
  bool operator==(const SandboxCounts&) const = default;
};

// privhelper's own figures as its probe reported them (proto PrivhelperFigures), for the
// agent's metrics. Refusal kinds privhelper names that this agent does not know are left out.
struct PrivhelperFigures {
  int64_t helpers_live = 0;
  std::vector<std::pair<std::string_view, int64_t>> refusals;  // kind label ("admission"...) -> count
  int64_t violations = 0;
  double probe_seconds = 0;
  int64_t resident_bytes = 0;
  double cpu_seconds = 0;
  int64_t open_fds = 0;
  std::vector<std::pair<int64_t, int64_t>> helpers_by_generation;  // generation -> live helpers
};

struct ProbeOutcome {
  bool ready = false;
  Diagnostic diagnostic = Diagnostic::kProviderUnavailable;  // meaningful when !ready
  std::string backend_fingerprint;
  std::string provider;
  std::string installation_id;  // the identity privhelper owns
  ProviderLimits limits;        // as reported: check LimitsInRange before using them
  // nullopt when privhelper could not count (its inventory failed) or reported a negative count.
  std::optional<SandboxCounts> sandboxes;
  // Every generation privhelper has a record of, in generation order.
  std::vector<GenerationReport> generations;
  // Set when privhelper reported its figures.
  std::optional<PrivhelperFigures> figures;

  // True when privhelper holds `generation` with exactly `digest` (READY).
  bool Holds(int64_t generation, const std::string& digest) const;
};

// True when both limits are within the spec's §3 ranges (an older privhelper reports 0).
bool LimitsInRange(const ProviderLimits& limits);

// Maps privhelper's proto Diagnostic number to the §7 code; unknown or unspecified numbers
// become provider_unavailable.
Diagnostic DiagnosticFromProto(int proto_value);

// Maps privhelper's proto GenerationState number to the agent's HeldState; nullopt for
// UNSPECIFIED or a number this agent does not know.
std::optional<HeldState> HeldStateFromProto(int proto_value);

// One blocking Probe call. `generation` 0 names none (before enrollment, and at start-up).
// Unavailable (with the gRPC error text, for the local log) when privhelper cannot be reached
// or refuses the call.
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

// Runs the blocking calls, in order, on its own worker thread; `post` hands a closure to the
// event loop.
class GrpcPrivhelperClient final : public ProviderProber {
 public:
  GrpcPrivhelperClient(std::string socket_path, absl::Duration deadline,
                       std::function<void(std::function<void()>)> post);
  ~GrpcPrivhelperClient() override;  // joins the worker after the call in progress
  void Probe(int64_t generation,
             std::function<void(absl::StatusOr<ProbeOutcome>)> done) override;

 private:
  std::string socket_path_;
  absl::Duration deadline_;
  std::function<void(std::function<void()>)> post_;
  std::unique_ptr<SerialWorker> worker_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_PRIVHELPER_RPC_PRIVHELPER_CLIENT_H_

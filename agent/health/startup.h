// `agent run`'s first step, before it dials Core: make sure the local privhelper is this
// node's provider. Single-threaded on the event loop:
//   1. Probe privhelper (generation 0: no generation is named before the agent knows what
//      privhelper holds). While it cannot be reached, log it and probe again after a bounded
//      backoff (privhelper may still be starting); nothing else is attempted.
//   2. Refuse (FailedPrecondition) a privhelper that owns another installation identity or
//      serves another provider than the node enrolled with, or that reports limits outside
//      the spec's ranges: the agent would report facts that are not this node's.
// The result is privhelper's limits and backend fingerprint for hello, and the probe itself:
// its generation reports seed the generation manager, which prepares the enrolled generation
// of a node without generation management again when privhelper does not report it READY
// (the same preparation path as `agent enroll`; generations/manager.h). Tests drive it with
// fakes and SimulatedClock.
#ifndef SANDBOX_NODE_AGENT_HEALTH_STARTUP_H_
#define SANDBOX_NODE_AGENT_HEALTH_STARTUP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/connection/backoff.h"
#include "agent/connection/health.h"
#include "agent/privhelper_rpc/privhelper_client.h"
#include "common/clock.h"

namespace sn::agent {

// Retrying an unreachable privhelper: full jitter from 1 s, doubling, capped at 15 s (it is a
// local process that systemd starts first; a long wait only delays the node).
inline constexpr absl::Duration kPrivhelperRetryInitial = absl::Seconds(1);
inline constexpr absl::Duration kPrivhelperRetryCap = absl::Seconds(15);

struct StartupInputs {
  std::string installation_id;  // the enrolled identity (identity.json)
  std::string provider;         // the enrolled provider
};

struct StartupFacts {
  ProviderLimits limits;
  std::string backend_fingerprint;
  ProbeOutcome probe;  // the accepted probe (its generation reports)
};

class PrivhelperStartup {
 public:
  // Pointers must outlive this object.
  PrivhelperStartup(StartupInputs inputs, ProviderProber* prober, TimerQueue* timers,
                    Backoff backoff);
  ~PrivhelperStartup();

  // Starts; `done` runs once on the event loop with the facts or the refusal. Destroying this
  // object first cancels the run (then `done` never runs).
  void Run(std::function<void(absl::StatusOr<StartupFacts>)> done);

  int probes() const { return probes_; }

 private:
  void ProbeNow();
  void OnProbe(absl::StatusOr<ProbeOutcome> outcome);
  void RetryLater(std::string_view what, const absl::Status& why);
  void Finish(absl::StatusOr<StartupFacts> result);

  StartupInputs inputs_;
  ProviderProber* prober_;
  TimerQueue* timers_;
  Backoff backoff_;
  std::function<void(absl::StatusOr<StartupFacts>)> done_;
  std::unique_ptr<Timer> retry_;
  int probes_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_HEALTH_STARTUP_H_

// `agent run`'s first step, before it dials Core: make sure the local privhelper is this
// node's provider and holds the enrolled generation. Single-threaded on the event loop:
//   1. Probe privhelper (generation 0: before registration, a generation privhelper does not
//      hold is not one to name). While it cannot be reached, log it and probe again after a
//      bounded backoff (privhelper may still be starting); nothing else is attempted.
//   2. Refuse (FailedPrecondition) a privhelper that owns another installation identity or
//      serves another provider than the node enrolled with, or that reports limits outside
//      the spec's ranges: the agent would report facts that are not this node's.
//   3. When the probe does not list the enrolled (generation, specification digest) among the
//      held generations, register it from the stored specification (idempotent in privhelper;
//      this also upgrades nodes enrolled before registration existed). privhelper's refusal is
//      FailedPrecondition; a privhelper that went away in between is retried from step 1.
// The result is privhelper's limits and backend fingerprint for hello. Tests drive it with
// fakes and SimulatedClock.
#ifndef SANDBOX_NODE_AGENT_STARTUP_H_
#define SANDBOX_NODE_AGENT_STARTUP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/backoff.h"
#include "agent/health.h"
#include "agent/privhelper_client.h"
#include "common/clock.h"

namespace sn::agent {

// Retrying an unreachable privhelper: full jitter from 1 s, doubling, capped at 15 s (it is a
// local process that systemd starts first; a long wait only delays the node).
inline constexpr absl::Duration kPrivhelperRetryInitial = absl::Seconds(1);
inline constexpr absl::Duration kPrivhelperRetryCap = absl::Seconds(15);

struct StartupInputs {
  std::string installation_id;  // the enrolled identity (identity.json)
  std::string provider;         // the enrolled provider
  int64_t generation = 0;       // the enrolled deployment generation
  std::string specification_digest;
  // The stored specification's bytes, already checked against the digest; nullopt when it is
  // missing or invalid (then a generation privhelper does not hold cannot be registered).
  std::optional<std::string> specification;
  // Why `specification` is missing (for the refusal's message).
  std::string specification_problem;
};

struct StartupFacts {
  ProviderLimits limits;
  std::string backend_fingerprint;
  bool registered = false;  // this start registered the generation (it was not held)
};

class PrivhelperStartup {
 public:
  // Pointers must outlive this object.
  PrivhelperStartup(StartupInputs inputs, ProviderProber* prober, GenerationRegistrar* registrar,
                    TimerQueue* timers, Backoff backoff);
  ~PrivhelperStartup();

  // Starts; `done` runs once on the event loop with the facts or the refusal. Destroying this
  // object first cancels the run (then `done` never runs).
  void Run(std::function<void(absl::StatusOr<StartupFacts>)> done);

  int probes() const { return probes_; }

 private:
  void ProbeNow();
  void OnProbe(absl::StatusOr<ProbeOutcome> outcome);
  void OnRegistered(const ProbeOutcome& probe, absl::Status st);
  void RetryLater(std::string_view what, const absl::Status& why);
  void Finish(absl::StatusOr<StartupFacts> result);

  StartupInputs inputs_;
  ProviderProber* prober_;
  GenerationRegistrar* registrar_;
  TimerQueue* timers_;
  Backoff backoff_;
  std::function<void(absl::StatusOr<StartupFacts>)> done_;
  std::unique_ptr<Timer> retry_;
  int probes_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_STARTUP_H_

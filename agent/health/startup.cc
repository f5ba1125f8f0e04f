#include "agent/health/startup.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace sn::agent {

PrivhelperStartup::PrivhelperStartup(StartupInputs inputs, ProviderProber* prober,
                                     TimerQueue* timers, Backoff backoff)
    : inputs_(std::move(inputs)),
      prober_(prober),
      timers_(timers),
      backoff_(std::move(backoff)) {}

PrivhelperStartup::~PrivhelperStartup() { alive_.reset(); }

void PrivhelperStartup::Run(std::function<void(absl::StatusOr<StartupFacts>)> done) {
  done_ = std::move(done);
  ProbeNow();
}

void PrivhelperStartup::ProbeNow() {
  ++probes_;
  std::weak_ptr<bool> alive = alive_;
  prober_->Probe(0, [this, alive](absl::StatusOr<ProbeOutcome> outcome) {
    if (!alive.expired()) OnProbe(std::move(outcome));
  });
}

void PrivhelperStartup::RetryLater(std::string_view what, const absl::Status& why) {
  const absl::Duration delay = backoff_.Next();
  LogWarning(absl::StrCat("privhelper is not reachable or did not answer (", std::string(what),
                          "); retrying before connecting to Core"),
             {{"attempt", probes_},
              {"retry_in_ms", absl::ToInt64Milliseconds(delay)},
              {"error", std::string(why.message())}});
  std::weak_ptr<bool> alive = alive_;
  retry_ = timers_->After(delay, [this, alive] {
    if (!alive.expired()) ProbeNow();
  });
}

void PrivhelperStartup::OnProbe(absl::StatusOr<ProbeOutcome> outcome) {
  if (!outcome.ok()) {
    RetryLater("probe", outcome.status());
    return;
  }
  if (outcome->installation_id != inputs_.installation_id) {
    Finish(absl::FailedPreconditionError(absl::StrCat(
        "privhelper owns installation ", outcome->installation_id,
        " but this node enrolled with installation ", inputs_.installation_id,
        "; refusing to run against it (is the agent pointed at another node's privhelper, or "
        "was privhelper's state replaced? re-enroll if the installation changed)")));
    return;
  }
  if (outcome->provider != inputs_.provider) {
    Finish(absl::FailedPreconditionError(
        absl::StrCat("privhelper serves provider \"", outcome->provider,
                     "\" but this node enrolled with \"", inputs_.provider, "\"")));
    return;
  }
  if (!LimitsInRange(outcome->limits)) {
    Finish(absl::FailedPreconditionError(absl::StrCat(
        "privhelper reported limits outside the spec's ranges (max_active ",
        outcome->limits.max_active, ", max_retained ", outcome->limits.max_retained,
        "); is it a privhelper of this release?")));
    return;
  }
  LogInfo("privhelper is this node's provider",
          {{"generations_reported", static_cast<int64_t>(outcome->generations.size())}});
  StartupFacts facts{outcome->limits, outcome->backend_fingerprint, *outcome};
  Finish(std::move(facts));
}

void PrivhelperStartup::Finish(absl::StatusOr<StartupFacts> result) {
  retry_.reset();
  if (!done_) return;
  auto done = std::move(done_);
  done_ = nullptr;
  done(std::move(result));
}

}  // namespace sn::agent

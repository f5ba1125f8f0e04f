#include "agent/health/probe_health.h"

#include <utility>

#include "common/log.h"

namespace sn::agent {
namespace {

void NotReady(HealthReport* report, Diagnostic d) {
  report->health.provider_ready = false;
  report->health.diagnostic = std::string(DiagnosticCode(d));
}

}  // namespace

std::string FormatTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

ProbeHealthSource::ProbeHealthSource(ProviderProber* prober, HostMetricsSource* host,
                                     const Clock* clock, EnrolledProvider enrolled,
                                     std::function<void(const ProbeOutcome&)> on_probe,
                                     std::function<Diagnostic()> not_held_diagnostic,
                                     std::function<void(Diagnostic)> on_probe_failed)
    : prober_(prober),
      host_(host),
      clock_(clock),
      enrolled_(std::move(enrolled)),
      on_probe_(std::move(on_probe)),
      not_held_diagnostic_(std::move(not_held_diagnostic)),
      on_probe_failed_(std::move(on_probe_failed)) {}

void ProbeHealthSource::Collect(std::function<void(HealthReport)> done) {
  const int64_t generation = enrolled_.generation_management ? 0 : enrolled_.generation;
  prober_->Probe(generation, [this, done = std::move(done)](
                                           absl::StatusOr<ProbeOutcome> outcome) {
    HealthReport report = FromProbe(outcome);
    if (report.health.provider_ready == false) {
      LogInfo("provider not ready", {{"diagnostic", *report.health.diagnostic}});
    }
    report.health.host = host_->Measure();
    report.health.host.sandboxes_active = last_counts_.active;
    report.health.host.sandboxes_retained = last_counts_.retained;
    report.health.observed_at = FormatTimestamp(clock_->Now());
    done(std::move(report));
  });
}

HealthReport ProbeHealthSource::FromProbe(const absl::StatusOr<ProbeOutcome>& outcome) {
  HealthReport report;
  if (!outcome.ok()) {
    LogWarning("privhelper probe failed; reporting provider_unavailable",
               {{"error", std::string(outcome.status().message())}});
    NotReady(&report, Diagnostic::kProviderUnavailable);
    if (on_probe_failed_) on_probe_failed_(Diagnostic::kProviderUnavailable);
    return report;
  }
  report.backend_fingerprint = outcome->backend_fingerprint;
  if (outcome->installation_id != enrolled_.installation_id) {
    LogError("privhelper owns another installation identity than this node enrolled with; "
             "refusing to use it",
             {{"enrolled", enrolled_.installation_id},
              {"privhelper", outcome->installation_id}});
    NotReady(&report, Diagnostic::kOwnershipRefused);
    if (on_probe_failed_) on_probe_failed_(Diagnostic::kOwnershipRefused);
    return report;  // neither its counts nor its limits are this node's
  }
  if (outcome->sandboxes.has_value()) last_counts_ = *outcome->sandboxes;
  if (LimitsInRange(outcome->limits)) report.limits = outcome->limits;
  if (on_probe_) on_probe_(*outcome);
  if (!enrolled_.generation_management &&
      !outcome->Holds(enrolled_.generation, enrolled_.specification_digest)) {
    const Diagnostic d =
        not_held_diagnostic_ ? not_held_diagnostic_() : Diagnostic::kProviderUnavailable;
    LogWarning("privhelper does not hold the enrolled generation; reporting it unready",
               {{"generation", enrolled_.generation}, {"diagnostic", DiagnosticCode(d)}});
    NotReady(&report, d);
    return report;
  }
  report.health.provider_ready = outcome->ready;
  if (!outcome->ready) report.health.diagnostic = std::string(DiagnosticCode(outcome->diagnostic));
  return report;
}

}  // namespace sn::agent

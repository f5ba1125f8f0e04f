#include "agent/probe_health.h"

#include <utility>

#include "common/log.h"

namespace sn::agent {

std::string FormatTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

ProbeHealthSource::ProbeHealthSource(ProviderProber* prober, HostMetricsSource* host,
                                     const Clock* clock, int64_t generation,
                                     std::string installation_id)
    : prober_(prober),
      host_(host),
      clock_(clock),
      generation_(generation),
      installation_id_(std::move(installation_id)) {}

void ProbeHealthSource::Collect(std::function<void(HealthReport)> done) {
  prober_->Probe(generation_, [this, done = std::move(done)](
                                  absl::StatusOr<ProbeOutcome> outcome) {
    HealthReport report;
    if (outcome.ok() && outcome->installation_id != installation_id_) {
      LogError("privhelper owns another installation identity than this node enrolled with; "
               "refusing to use it",
               {{"enrolled", installation_id_}, {"privhelper", outcome->installation_id}});
      report.health.provider_ready = false;
      report.health.diagnostic = std::string(DiagnosticCode(Diagnostic::kOwnershipRefused));
      report.backend_fingerprint = outcome->backend_fingerprint;
    } else if (outcome.ok()) {
      report.health.provider_ready = outcome->ready;
      if (!outcome->ready) {
        report.health.diagnostic = std::string(DiagnosticCode(outcome->diagnostic));
      }
      report.backend_fingerprint = outcome->backend_fingerprint;
    } else {
      LogWarning("privhelper probe failed; reporting provider_unavailable",
                 {{"error", std::string(outcome.status().message())}});
      report.health.provider_ready = false;
      report.health.diagnostic = std::string(DiagnosticCode(Diagnostic::kProviderUnavailable));
    }
    if (report.health.provider_ready == false) {
      LogInfo("provider not ready", {{"diagnostic", *report.health.diagnostic}});
    }
    report.health.host = host_->Measure();
    report.health.observed_at = FormatTimestamp(clock_->Now());
    done(std::move(report));
  });
}

}  // namespace sn::agent

// GenerationManager: what the agent reports and answers from its facts (observations, the
// request gate, the operator snapshot). The decisions that change state are in manager.cc.
#include <utility>

#include "agent/generations/manager.h"

namespace sn::agent {
namespace {

std::pair<int64_t, std::string> Key(const GenerationRef& ref) {
  return {ref.generation, ref.specification_digest};
}

}  // namespace

GenerationStatus GenerationManager::StatusOf(const GenerationRef& ref) const {
  GenerationStatus st;
  st.ref = ref;
  const std::optional<GenerationRef> target = CurrentTarget();
  st.target = target.has_value() && target->generation == ref.generation;
  st.serving = pins_.serving.has_value() && pins_.serving->generation == ref.generation;
  auto rep = reports_.find(ref.generation);
  const GenerationReport* report = rep == reports_.end() ? nullptr : &rep->second;
  const PreparationScheduler::Entry* e = scheduler_.Find(ref.generation);
  if (e != nullptr && !(e->job.ref == ref)) e = nullptr;
  auto failed = [&](Diagnostic d) {
    st.state = wire::GenerationState::kFailed;
    st.diagnostic = d;
  };
  auto last = last_failure_.find(Key(ref));
  using Phase = PreparationScheduler::Phase;
  if (report != nullptr && report->specification_digest != ref.specification_digest) {
    failed(Diagnostic::kConfigurationInvalid);  // the number is held with another digest
  } else if (report != nullptr && IsRetired(report->state)) {
    failed(Diagnostic::kConfigurationInvalid);  // a target Core names that was collected (§3)
  } else if (e != nullptr && e->phase == Phase::kRunning) {
    st.state = wire::GenerationState::kPreparing;
    st.progress = e->progress;
  } else if (report != nullptr && report->state == HeldState::kReady &&
             provider_unready_.has_value()) {
    failed(*provider_unready_);  // held, but the provider's last probe failed (20a)
    st.held = true;
  } else if (report != nullptr && report->state == HeldState::kReady) {
    st.state = wire::GenerationState::kReady;
    st.held = true;
  } else if (report != nullptr && report->state == HeldState::kNeedsRepair) {
    // Held, never advertised ready: what is missing, until a repair makes it READY again
    // (a repair's transient failures are in the log and `agent generations`).
    failed(report->diagnostic.value_or(Diagnostic::kRuntimeMissing));
    st.held = true;
  } else if (report != nullptr && report->state == HeldState::kFailed) {
    failed(report->diagnostic.value_or(Diagnostic::kConfigurationInvalid));
  } else if (e != nullptr && e->phase == Phase::kBackoff) {
    failed(e->last_failure.value_or(Diagnostic::kProviderUnavailable));
  } else if (e != nullptr) {
    st.state = wire::GenerationState::kPreparing;  // queued: its turn comes
  } else if (last != last_failure_.end()) {
    failed(last->second);
  } else if (report != nullptr) {
    // A plan nobody carries on (an attempt that was cancelled or interrupted, and the
    // generation is no longer wanted): it stays visible, never as preparing.
    failed(Diagnostic::kPreparationCancelled);
  } else {
    st.state = wire::GenerationState::kPreparing;  // a target not yet started
  }
  return st;
}

wire::Observation GenerationManager::ObservationOf(const GenerationRef& ref) const {
  GenerationStatus st = StatusOf(ref);
  wire::Observation o;
  o.generation = ref.generation;
  o.specification_digest = ref.specification_digest;
  o.state = st.state;
  if (st.state != wire::GenerationState::kReady && st.diagnostic.has_value()) {
    o.diagnostic = std::string(DiagnosticCode(*st.diagnostic));
  }
  return o;
}

std::vector<GenerationStatus> GenerationManager::Snapshot() const {
  std::vector<GenerationRef> leading;
  const std::optional<GenerationRef> target = CurrentTarget();
  if (target.has_value()) leading.push_back(*target);
  if (pins_.serving.has_value() &&
      (!target.has_value() || pins_.serving->generation != target->generation)) {
    leading.push_back(*pins_.serving);
  }
  auto is_leading = [&](int64_t g) {
    for (const GenerationRef& r : leading) {
      if (r.generation == g) return true;
    }
    return false;
  };
  std::map<int64_t, GenerationRef> others;
  for (const auto& [g, r] : reports_) {
    if (IsRetired(r.state)) continue;  // never reported (§3 observation)
    if (!is_leading(g)) others[g] = GenerationRef{g, r.specification_digest};
  }
  for (const PreparationScheduler::Entry& e : scheduler_.entries()) {
    if (!is_leading(e.job.ref.generation) && !others.count(e.job.ref.generation)) {
      others[e.job.ref.generation] = e.job.ref;
    }
  }
  std::vector<GenerationStatus> out;
  for (const GenerationRef& r : leading) out.push_back(StatusOf(r));
  for (const auto& [g, r] : others) out.push_back(StatusOf(r));
  return out;
}

std::vector<wire::Observation> GenerationManager::NextObservations() {
  if (!options_.generation_management) return {};
  std::vector<wire::Observation> leading;
  std::vector<wire::Observation> others;
  size_t n_leading = 0;
  {
    const std::optional<GenerationRef> target = CurrentTarget();
    n_leading = (target.has_value() ? 1 : 0) +
                (pins_.serving.has_value() &&
                         (!target.has_value() || pins_.serving->generation != target->generation)
                     ? 1
                     : 0);
  }
  std::vector<GenerationStatus> all = Snapshot();
  for (size_t i = 0; i < all.size(); ++i) {
    wire::Observation o = ObservationOf(all[i].ref);
    (i < n_leading ? leading : others).push_back(std::move(o));
  }
  return rotor_.Next(std::move(leading), std::move(others));
}

bool GenerationManager::Ready(int64_t generation) const {
  // READY, and not being prepared again (a held generation under repair).
  return ReadyReport(generation) != nullptr && scheduler_.Find(generation) == nullptr;
}

std::optional<std::set<std::string>> GenerationManager::ImagesOf(const GenerationRef& ref) {
  auto it = images_.find(Key(ref));
  if (it != images_.end()) return it->second;
  if (!specifications_) return std::nullopt;
  std::optional<std::set<std::string>> images = specifications_(ref);
  if (images.has_value()) images_[Key(ref)] = *images;
  return images;
}

GateAnswer GenerationManager::Admit(const wire::Request& request) {
  const int64_t g = request.generation;
  if (!options_.generation_management && g != options_.enrolled.generation) {
    return GateAnswer::kUnconfirmed;
  }
  const GenerationReport* held = Held(g);
  if (held == nullptr) return GateAnswer::kUnconfirmed;  // never prepared, a plan, failed
  if (collecting_.count(g)) return GateAnswer::kUnconfirmed;  // its collection is in flight
  const std::optional<GenerationRef> target = CurrentTarget();
  if (target.has_value() && target->generation == g &&
      target->specification_digest != held->specification_digest) {
    return GateAnswer::kUnconfirmed;  // Core's generation g is not the one held here
  }
  const bool needs_ready =
      request.operation == wire::Operation::kCreate ||
      (request.operation == wire::Operation::kResume &&
       !std::get<wire::ResumeArgs>(request.args).reconciliation_only);
  if (needs_ready && !Ready(g)) return GateAnswer::kUnconfirmed;
  if (request.operation == wire::Operation::kCreate) {
    std::optional<std::set<std::string>> images =
        ImagesOf(GenerationRef{g, held->specification_digest});
    if (!images.has_value()) return GateAnswer::kUnconfirmed;  // no verified specification
    if (!images->count(std::get<wire::CreateArgs>(request.args).image)) {
      return GateAnswer::kInvalid;
    }
  }
  return GateAnswer::kRun;
}

std::optional<std::string> GenerationManager::DigestOf(int64_t generation) {
  const GenerationReport* held = Held(generation);
  if (held == nullptr) return std::nullopt;
  return held->specification_digest;
}

Diagnostic GenerationManager::EnrolledNotHeldDiagnostic() const {
  auto rep = reports_.find(options_.enrolled.generation);
  if (rep != reports_.end() && rep->second.state == HeldState::kNeedsRepair &&
      rep->second.specification_digest == options_.enrolled.specification_digest) {
    return rep->second.diagnostic.value_or(Diagnostic::kRuntimeMissing);  // under repair
  }
  GenerationStatus st = StatusOf(options_.enrolled);
  if (st.state == wire::GenerationState::kFailed && st.diagnostic.has_value()) {
    return *st.diagnostic;
  }
  return Diagnostic::kProviderUnavailable;
}

}  // namespace sn::agent

#include "agent/generations/manager.h"

#include <algorithm>
#include <utility>

#include "common/log.h"

namespace sn::agent {

GenerationManager::GenerationManager(GenerationManagerOptions options, const Clock* clock,
                                     TimerQueue* timers, PinStore* pins, Preparer* preparer,
                                     SpecificationLookup specifications,
                                     ProgressRecorder recorder)
    : options_(std::move(options)),
      pin_store_(pins),
      specifications_(std::move(specifications)),
      recorder_(std::move(recorder)),
      scheduler_(
          clock, timers, preparer,
          [this](const PreparationJob& job, const PreparationOutcome& outcome,
                 const PreparationProgress& last) { OnAttemptFinished(job, outcome, last); },
          [this](const PreparationJob& job, const PreparationProgress& progress) {
            if (recorder_) recorder_(job, progress, std::nullopt);
          }) {
  // A generation-managing node prepares nothing before a connection delivered facts.
  if (options_.generation_management) scheduler_.Pause();
}

GenerationManager::~GenerationManager() = default;

absl::Status GenerationManager::Start() {
  absl::StatusOr<DeploymentPins> pins = pin_store_->Load();
  if (!pins.ok()) return pins.status();
  pins_ = *std::move(pins);
  Recompute();
  return absl::OkStatus();
}

void GenerationManager::OnGenerationReports(const std::vector<GenerationReport>& reports,
                                            std::optional<Diagnostic> provider_unready) {
  if (provider_unready.has_value() != provider_unready_.has_value()) {
    if (provider_unready.has_value()) {
      LogWarning("the provider's probe failed; no generation is ready until it passes",
                 {{"diagnostic", DiagnosticCode(*provider_unready)}});
    } else {
      LogInfo("the provider's probe passed");
    }
  }
  provider_unready_ = provider_unready;
  std::map<int64_t, GenerationReport> next;
  for (const GenerationReport& r : reports) {
    if (r.generation <= 0) continue;
    GenerationReport report = r;
    if (report.state == HeldState::kPreparing &&
        prepared_here_.count({r.generation, r.specification_digest})) {
      report.state = HeldState::kReady;  // an answer from before the publication
    }
    if (dropped_here_.count({r.generation, r.specification_digest})) {
      report.state = HeldState::kDropped;  // an answer from before the collection
      report.diagnostic.reset();
    }
    next[r.generation] = std::move(report);
  }
  reported_ = true;
  for (const auto& [g, r] : next) {
    auto old = reports_.find(g);
    if (old != reports_.end() && old->second.state == HeldState::kReady &&
        r.state != HeldState::kReady && !IsRetired(r.state)) {  // a collection is no surprise
      LogWarning("privhelper no longer reports a generation ready",
                 {{"generation", g}});
    }
    if (old == reports_.end() || old->second.state != r.state ||
        old->second.specification_digest != r.specification_digest) {
      LogInfo("privhelper reports a generation",
              {{"generation", g}, {"state", HeldStateName(r.state)}});
    }
    if (r.state == HeldState::kReady) last_failure_.erase({g, r.specification_digest});
  }
  reports_ = std::move(next);
  QueueRepairs();
  Recompute();
}

void GenerationManager::OnProbeFailed(Diagnostic diagnostic) {
  if (!provider_unready_.has_value()) {
    LogWarning("privhelper's probe failed; no generation is ready until a probe passes",
               {{"diagnostic", DiagnosticCode(diagnostic)}});
  }
  provider_unready_ = diagnostic;
  Recompute();
}

void GenerationManager::RequestPreparation(const GenerationRef& ref) {
  if (std::find(repairs_.begin(), repairs_.end(), ref) == repairs_.end()) {
    repairs_.push_back(ref);
  }
  Recompute();
}

void GenerationManager::OnDeployment(const wire::Deployment& deployment) {
  if (!options_.generation_management) return;
  if (!facts_.has_value() || !(*facts_ == deployment)) {
    LogInfo("deployment facts", {{"target", deployment.generation},
                                 {"specification_digest", deployment.specification_digest},
                                 {"serving_generation",
                                  deployment.serving_generation.has_value()
                                      ? std::to_string(*deployment.serving_generation)
                                      : std::string("null")}});
  }
  facts_ = deployment;
  scheduler_.Resume();
  Recompute();
}

void GenerationManager::OnDisconnected() {
  if (!options_.generation_management) return;
  facts_.reset();
  scheduler_.Pause();
  Recompute();
}

std::optional<GenerationRef> GenerationManager::CurrentTarget() const {
  if (!options_.generation_management) return options_.enrolled;
  if (facts_.has_value()) return GenerationRef{facts_->generation, facts_->specification_digest};
  return pins_.target;
}

const GenerationReport* GenerationManager::Held(int64_t generation) const {
  auto it = reports_.find(generation);
  if (it == reports_.end() || (it->second.state != HeldState::kReady &&
                               it->second.state != HeldState::kNeedsRepair)) {
    return nullptr;
  }
  return &it->second;
}

const GenerationReport* GenerationManager::ReadyReport(int64_t generation) const {
  const GenerationReport* held = Held(generation);
  if (provider_unready_.has_value()) return nullptr;  // no passing probe (20a)
  return held != nullptr && held->state == HeldState::kReady ? held : nullptr;
}

bool GenerationManager::NeedsPreparation(const GenerationRef& ref) const {
  auto it = reports_.find(ref.generation);
  if (it == reports_.end()) return true;
  // Held with another digest: never replaced. FAILED: refused for adoption, kept as found.
  // COLLECTING and DROPPED: never prepared again. NEEDS_REPAIR: repaired (repair.cc).
  if (it->second.specification_digest != ref.specification_digest) return false;
  if (IsRetired(it->second.state)) return false;
  return it->second.state == HeldState::kPreparing ||
         it->second.state == HeldState::kNeedsRepair;
}

void GenerationManager::Recompute() {
  if (options_.generation_management && !facts_.has_value()) {
    // Between connections: the scheduler is paused and keeps its jobs and their backoff
    // until the next connection's facts say what is wanted.
    return;
  }
  std::vector<PreparationJob> jobs;
  auto want = [&](const GenerationRef& ref, JobRole role) {
    if (!reported_) return;  // privhelper's view first
    for (const PreparationJob& j : jobs) {
      if (j.ref.generation == ref.generation) return;
    }
    if (NeedsPreparation(ref)) jobs.push_back(PreparationJob{ref, role});
  };
  if (options_.generation_management) {
    want(GenerationRef{facts_->generation, facts_->specification_digest}, JobRole::kTarget);
    if (pins_.serving.has_value()) want(*pins_.serving, JobRole::kServing);
  } else {
    want(options_.enrolled, JobRole::kTarget);
  }
  // Issue 11's repairs (and anything else asked for); forgotten once READY.
  std::vector<GenerationRef> still;
  for (const GenerationRef& r : repairs_) {
    const GenerationReport* ready = ReadyReport(r.generation);
    if (ready != nullptr && ready->specification_digest == r.specification_digest) continue;
    still.push_back(r);
    want(r, JobRole::kOther);
  }
  repairs_ = std::move(still);
  scheduler_.SetWanted(std::move(jobs));
  MovePins();
}

void GenerationManager::MovePins() {
  if (!options_.generation_management || !facts_.has_value()) return;
  DeploymentPins next = pins_;
  next.target = GenerationRef{facts_->generation, facts_->specification_digest};
  if (facts_->serving_generation.has_value()) {
    const int64_t s = *facts_->serving_generation;
    const GenerationReport* held = ReadyReport(s);
    const bool matches_target =
        s != next.target->generation ||
        (held != nullptr && held->specification_digest == next.target->specification_digest);
    if (held != nullptr && matches_target) {
      next.serving = GenerationRef{s, held->specification_digest};
    }
  }
  if (next == pins_) return;
  absl::Status st = pin_store_->Store(next);
  if (!st.ok()) {
    LogError("cannot persist the deployment pins; keeping the previous ones",
             {{"error", std::string(st.message())}});
    return;
  }
  if (next.serving != pins_.serving) {
    LogInfo("serving pin moved", {{"generation", next.serving->generation},
                                  {"specification_digest", next.serving->specification_digest}});
  }
  pins_ = std::move(next);
}

void GenerationManager::OnAttemptFinished(const PreparationJob& job,
                                          const PreparationOutcome& outcome,
                                          const PreparationProgress& last) {
  const std::pair<int64_t, std::string> key{job.ref.generation, job.ref.specification_digest};
  if (!outcome.failure.has_value()) {
    last_failure_.erase(key);
    prepared_here_.insert(key);
    reports_[job.ref.generation] =
        GenerationReport{job.ref.generation, job.ref.specification_digest, HeldState::kReady,
                         std::nullopt};
    images_[key] = outcome.images;
  } else {
    last_failure_[key] = *outcome.failure;
    if (outcome.state == HeldState::kFailed ||
        (outcome.state.has_value() && IsRetired(*outcome.state))) {
      // privhelper refuses to adopt it: never prepared again.
      reports_[job.ref.generation] = GenerationReport{
          job.ref.generation, job.ref.specification_digest, *outcome.state, outcome.failure};
    }
  }
  if (recorder_) recorder_(job, last, outcome);
  Recompute();
}

std::vector<GenerationRef> GenerationManager::RetentionCandidates() const {
  std::vector<GenerationRef> out;
  if (!options_.generation_management) return out;
  for (const auto& [g, r] : reports_) {
    if (r.state == HeldState::kDropped) continue;
    const GenerationRef ref{g, r.specification_digest};
    if (LocalReference(ref).has_value()) continue;
    out.push_back(ref);
  }
  return out;
}

std::optional<std::string> GenerationManager::LocalReference(const GenerationRef& ref) const {
  const std::optional<GenerationRef> target = CurrentTarget();
  // By number: a target Core names with another digest still keeps the number's record.
  if (target.has_value() && target->generation == ref.generation) return "target";
  if (pins_.target.has_value() && pins_.target->generation == ref.generation) {
    return "target pin";
  }
  if (pins_.serving.has_value() && pins_.serving->generation == ref.generation) {
    return "serving pin";
  }
  if (options_.enrolled.generation == ref.generation && !options_.generation_management) {
    return "enrolled generation";
  }
  if (scheduler_.Find(ref.generation) != nullptr) return "preparation";
  for (const GenerationRef& r : repairs_) {
    if (r.generation == ref.generation) return "preparation";
  }
  return std::nullopt;
}

void GenerationManager::CollectionStarted(const GenerationRef& ref) {
  collecting_.insert(ref.generation);
}

void GenerationManager::CollectionEnded(const GenerationRef& ref,
                                        std::optional<HeldState> state) {
  collecting_.erase(ref.generation);
  if (state.has_value()) {
    auto it = reports_.find(ref.generation);
    if (it != reports_.end() && it->second.specification_digest == ref.specification_digest) {
      it->second.state = *state;
      if (*state != HeldState::kFailed) it->second.diagnostic.reset();
    }
    if (*state == HeldState::kDropped) {
      dropped_here_.insert({ref.generation, ref.specification_digest});
    }
  }
  Recompute();
}

}  // namespace sn::agent

#include "agent/generations/scheduler.h"

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "common/wait_scale.h"

namespace sn::agent {

absl::Duration PreparationRetryDelay(int consecutive_failures) {
  switch (consecutive_failures) {
    case 0:
    case 1: return absl::Minutes(1);
    case 2: return absl::Minutes(2);
    case 3: return absl::Minutes(5);
    case 4: return absl::Minutes(10);
    default: return absl::Minutes(30);
  }
}

PreparationScheduler::PreparationScheduler(const Clock* clock, TimerQueue* timers,
                                           Preparer* preparer, FinishedFn on_finished,
                                           ProgressFn on_progress)
    : clock_(clock),
      timers_(timers),
      preparer_(preparer),
      on_finished_(std::move(on_finished)),
      on_progress_(std::move(on_progress)) {}

PreparationScheduler::~PreparationScheduler() {
  alive_.reset();
  if (running_.has_value() && running_->attempt != nullptr) running_->attempt->Cancel();
}

const PreparationScheduler::Entry* PreparationScheduler::Find(int64_t generation) const {
  for (const Entry& e : entries_) {
    if (e.job.ref.generation == generation) return &e;
  }
  return nullptr;
}

PreparationScheduler::Entry* PreparationScheduler::FindMutable(const GenerationRef& ref) {
  for (Entry& e : entries_) {
    if (e.job.ref == ref) return &e;
  }
  return nullptr;
}

void PreparationScheduler::SetWanted(std::vector<PreparationJob> jobs) {
  std::vector<Entry> next;
  next.reserve(jobs.size());
  for (PreparationJob& job : jobs) {
    Entry* old = FindMutable(job.ref);
    Entry e = old != nullptr ? *old : Entry{};
    e.job = std::move(job);
    next.push_back(std::move(e));
  }
  entries_ = std::move(next);
  if (running_.has_value() && !running_->cancel_reason.has_value() &&
      FindMutable(running_->job.ref) == nullptr) {
    LogInfo("preparation superseded; cancelling it",
            {{"generation", running_->job.ref.generation}});
    CancelRunning(Diagnostic::kPreparationCancelled);
  }
  MaybeStart();
}

void PreparationScheduler::Pause() {
  paused_ = true;
  wake_.reset();
  if (running_.has_value() && !running_->cancel_reason.has_value()) {
    LogInfo("connection lost; cancelling the preparation",
            {{"generation", running_->job.ref.generation}});
    CancelRunning(Diagnostic::kPreparationCancelled);
  }
}

void PreparationScheduler::Resume() {
  paused_ = false;
  MaybeStart();
}

void PreparationScheduler::MaybeStart() {
  if (paused_ || running_.has_value()) return;
  wake_.reset();
  const MonoTime now = clock_->Monotonic();
  std::optional<MonoTime> earliest;
  for (Entry& e : entries_) {
    if (e.phase == Phase::kBackoff && e.retry_at <= now) e.phase = Phase::kQueued;
    if (e.phase == Phase::kQueued) {
      StartEntry(e);
      return;
    }
    if (e.phase == Phase::kBackoff && (!earliest.has_value() || e.retry_at < *earliest)) {
      earliest = e.retry_at;
    }
  }
  if (earliest.has_value()) {
    std::weak_ptr<bool> alive = alive_;
    wake_ = timers_->After(*earliest - now, [this, alive] {
      if (!alive.expired()) MaybeStart();
    });
  }
}

void PreparationScheduler::StartEntry(Entry& e) {
  e.phase = Phase::kRunning;
  e.progress.reset();
  const uint64_t id = next_id_++;
  running_.emplace();
  running_->id = id;
  running_->job = e.job;
  std::weak_ptr<bool> alive = alive_;
  running_->deadline = timers_->After(kPreparationDeadline, [this, alive, id] {
    if (alive.expired() || !running_.has_value() || running_->id != id) return;
    LogWarning("preparation exceeded its deadline; cancelling it",
               {{"generation", running_->job.ref.generation}});
    CancelRunning(Diagnostic::kPreparationTimeout);
  });
  LogInfo("starting a preparation attempt",
          {{"generation", e.job.ref.generation},
           {"role", JobRoleName(e.job.role)},
           {"previous_failures", e.failures}});
  const PreparationJob job = e.job;  // `e` may move while Start runs callbacks later
  std::unique_ptr<PreparationAttempt> attempt = preparer_->Start(
      job,
      [this, alive, id](const PreparationProgress& p) {
        if (!alive.expired()) OnProgress(id, p);
      },
      [this, alive, id](PreparationOutcome o) {
        if (!alive.expired()) OnDone(id, std::move(o));
      });
  if (running_.has_value() && running_->id == id) running_->attempt = std::move(attempt);
}

void PreparationScheduler::CancelRunning(Diagnostic reason) {
  running_->cancel_reason = reason;
  running_->deadline.reset();
  if (running_->attempt != nullptr) running_->attempt->Cancel();
}

void PreparationScheduler::OnProgress(uint64_t id, const PreparationProgress& p) {
  if (!running_.has_value() || running_->id != id) return;
  running_->progress = p;
  Entry* e = FindMutable(running_->job.ref);
  if (e != nullptr) e->progress = p;
  if (!running_->lines.Due(clock_->Monotonic(), p.phase + "/" + p.artifact,
                           static_cast<uint64_t>(std::max<int64_t>(p.bytes_done, 0)),
                           static_cast<uint64_t>(std::max<int64_t>(p.bytes_total, 0)))) {
    return;
  }
  LogInfo("preparation progress", {{"generation", running_->job.ref.generation},
                                   {"phase", p.phase},
                                   {"artifact", p.artifact},
                                   {"bytes_done", p.bytes_done},
                                   {"bytes_total", p.bytes_total}});
  if (on_progress_) on_progress_(running_->job, p);
}

void PreparationScheduler::OnDone(uint64_t id, PreparationOutcome outcome) {
  if (!running_.has_value() || running_->id != id) return;
  Running ended = std::move(*running_);
  running_.reset();
  const bool cancelled_by_us = ended.cancel_reason.has_value();
  if (outcome.failure.has_value() && cancelled_by_us) outcome.failure = ended.cancel_reason;
  Entry* e = FindMutable(ended.job.ref);
  if (!outcome.failure.has_value()) {
    if (e != nullptr) {
      entries_.erase(entries_.begin() + (e - entries_.data()));
    }
  } else if (e != nullptr) {
    e->progress.reset();
    e->last_failure = outcome.failure;
    if (cancelled_by_us && *ended.cancel_reason == Diagnostic::kPreparationCancelled) {
      e->phase = Phase::kQueued;  // not the attempt's fault: no backoff
    } else {
      ++e->failures;
      e->phase = Phase::kBackoff;
      const absl::Duration wait = ScaledWait(PreparationRetryDelay(e->failures));
      e->retry_at = clock_->Monotonic() + wait;
      LogWarning("preparation attempt failed; retrying later",
                 {{"generation", ended.job.ref.generation},
                  {"diagnostic", DiagnosticCode(*outcome.failure)},
                  {"failures", e->failures},
                  {"retry_in_s", absl::ToInt64Seconds(wait)}});
    }
  }
  std::weak_ptr<bool> alive = alive_;
  if (on_finished_) on_finished_(ended.job, outcome, ended.progress);
  if (!alive.expired()) MaybeStart();
}

}  // namespace sn::agent

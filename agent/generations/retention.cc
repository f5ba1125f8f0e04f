#include "agent/generations/retention.h"

#include <algorithm>
#include <set>
#include <utility>

#include "common/log.h"
#include "common/wait_scale.h"
#include "common/wire/limits.h"

namespace sn::agent {

RetentionDecisions::RetentionDecisions(const Clock* clock, RetentionFacts* facts,
                                       CallCounter calls, GenerationCollector* collector,
                                       Recorder recorder)
    : clock_(clock),
      facts_(facts),
      calls_(std::move(calls)),
      collector_(collector),
      recorder_(std::move(recorder)) {}

RetentionDecisions::~RetentionDecisions() {
  alive_.reset();
  if (in_flight_.has_value() && in_flight_->call != nullptr) in_flight_->call->Cancel();
}

void RetentionDecisions::OnLive() {
  live_ = true;
  ++connection_;
}

void RetentionDecisions::OnLiveEnded() {
  live_ = false;
  if (!grants_.empty()) {
    LogInfo("the connection ended: its unused drop grants are void",
            {{"grants", static_cast<int64_t>(grants_.size())}});
  }
  grants_.clear();
  if (in_flight_.has_value() && in_flight_->call != nullptr) in_flight_->call->Cancel();
}

RetentionDecisions::Candidate& RetentionDecisions::CandidateOf(const GenerationRef& ref) {
  Candidate& c = candidates_[Key{ref.generation, ref.specification_digest}];
  c.status.ref = ref;
  return c;
}

std::vector<wire::RetentionEntry> RetentionDecisions::NextRetentionRequest() {
  if (!live_) return {};
  std::set<Key> now_candidates;
  for (const GenerationRef& ref : facts_->RetentionCandidates()) {
    now_candidates.insert(Key{ref.generation, ref.specification_digest});
    CandidateOf(ref);
  }
  std::set<Key> busy;
  for (const Grant& g : grants_) busy.insert(Key{g.ref.generation, g.ref.specification_digest});
  if (in_flight_.has_value()) {
    busy.insert(Key{in_flight_->ref.generation, in_flight_->ref.specification_digest});
  }
  for (auto it = candidates_.begin(); it != candidates_.end();) {
    if (!now_candidates.count(it->first) && !busy.count(it->first)) {
      it = candidates_.erase(it);
    } else {
      ++it;
    }
  }
  const MonoTime now = clock_->Monotonic();
  std::vector<std::pair<MonoTime, Key>> due;
  for (const auto& [key, c] : candidates_) {
    if (busy.count(key) || !now_candidates.count(key) || c.due > now) continue;
    due.push_back({c.due, key});
  }
  std::sort(due.begin(), due.end());
  if (due.size() > wire::kMaxRetentionEntries) due.resize(wire::kMaxRetentionEntries);
  std::vector<wire::RetentionEntry> out;
  for (const auto& [when, key] : due) {
    out.push_back(wire::RetentionEntry{key.first, key.second, std::nullopt});
  }
  Record();
  return out;
}

void RetentionDecisions::OnRetentionAnswer(const std::vector<wire::RetentionEntry>& answers) {
  const MonoTime now = clock_->Monotonic();
  const absl::Time wall = clock_->Now();
  for (const wire::RetentionEntry& a : answers) {
    const GenerationRef ref{a.generation, a.specification_digest};
    Candidate& c = CandidateOf(ref);
    c.ever_answered = true;
    c.status.answered_at = wall;
    c.status.keep = a.keep.value_or(true);
    c.due = now + ScaledWait(kRetentionCycle);
    if (a.keep.value_or(true)) continue;
    LogInfo("Core granted a drop", {{"generation", ref.generation},
                                    {"specification_digest", ref.specification_digest}});
    c.status.granted_at = wall;
    grants_.push_back(Grant{ref, connection_});
  }
  Record();
  UseGrants();
}

void RetentionDecisions::UseGrants() {
  while (!in_flight_.has_value() && !grants_.empty()) {
    Grant g = std::move(grants_.front());
    grants_.pop_front();
    if (!live_ || g.connection != connection_) {
      LogInfo("a drop grant of an ended connection is ignored",
              {{"generation", g.ref.generation}});
      continue;
    }
    Candidate& c = CandidateOf(g.ref);
    std::optional<std::string> local = facts_->LocalReference(g.ref);
    const size_t calls = calls_ ? calls_(g.ref.generation) : 0;
    if (!local.has_value() && calls > 0) {
      local = std::to_string(calls) + " queued or running provider call(s)";
    }
    if (local.has_value()) {
      LogInfo("a granted drop waits: the node still references the generation",
              {{"generation", g.ref.generation}, {"reference", *local}});
      c.status.collection = "held locally";
      c.status.reason = *local;
      c.status.diagnostic.reset();
      c.due = clock_->Monotonic() + ScaledWait(kRetentionHeldRetry);
      continue;
    }
    facts_->CollectionStarted(g.ref);
    const uint64_t id = ++next_call_;
    in_flight_ = InFlight{g.ref, g.connection, nullptr};
    std::weak_ptr<bool> alive = alive_;
    std::unique_ptr<CollectCall> call =
        collector_->Collect(g.ref, [this, alive, id](CollectResult result) {
          if (!alive.expired()) OnCollected(id, std::move(result));
        });
    // `done` never runs inside Collect, so the call is still in flight here.
    if (in_flight_.has_value()) in_flight_->call = std::move(call);
  }
  Record();
}

void RetentionDecisions::OnCollected(uint64_t id, CollectResult result) {
  if (!in_flight_.has_value() || id != next_call_) return;
  const GenerationRef ref = in_flight_->ref;
  in_flight_.reset();
  facts_->CollectionEnded(ref, result.state);
  Candidate& c = CandidateOf(ref);
  c.status.collection = std::string(CollectOutcomeName(result.outcome));
  c.status.reason = result.reason;
  c.status.diagnostic = result.diagnostic;
  const MonoTime now = clock_->Monotonic();
  LogLevel level = LogLevel::kInfo;
  std::string_view msg = "generation collected";
  switch (result.outcome) {
    case CollectOutcome::kDropped:
      break;
    case CollectOutcome::kHeld:
      msg = "privhelper still holds the generation; a new grant is needed";
      c.due = now + ScaledWait(kRetentionHeldRetry);
      break;
    case CollectOutcome::kRefused:
      level = LogLevel::kWarning;
      msg = "privhelper refused to collect the generation; it is kept";
      c.due = now + ScaledWait(kRetentionRefusedRetry);
      break;
    case CollectOutcome::kUnknown:
      level = LogLevel::kWarning;
      msg = "privhelper records no such generation";
      break;
    case CollectOutcome::kFailed:
      level = LogLevel::kError;
      msg = "the collection failed; the generation is kept";
      c.due = now + ScaledWait(kRetentionCycle);
      break;
  }
  Log(level, msg,
      {{"generation", ref.generation},
       {"specification_digest", ref.specification_digest},
       {"outcome", CollectOutcomeName(result.outcome)},
       {"reason", result.reason}});
  Record();
  UseGrants();
}

std::vector<RetentionStatus> RetentionDecisions::Statuses() const {
  std::vector<RetentionStatus> out;
  for (const auto& [key, c] : candidates_) out.push_back(c.status);
  return out;
}

void RetentionDecisions::Record() {
  if (!recorder_) return;
  std::vector<RetentionStatus> now = Statuses();
  if (now == last_recorded_) return;
  last_recorded_ = now;
  recorder_(now);
}

}  // namespace sn::agent

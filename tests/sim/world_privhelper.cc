// privhelper and the provider: native executions (late, failed, restarted mid-call) and collections.
#include "tests/sim/world_internal.h"

namespace sn::sim::internal {

void World::Execute(const wire::Request& request, absl::Duration remaining,
             std::function<void(ExecOutcome)> done) {
  if (AgentDead()) return;  // the process is gone: nothing reaches privhelper
  const uint64_t inc = incarnation_;
  const bool mutation = wire::IsMutationRequest(request.operation, request.args);
  if (!disk_full_ && mutation && disk_rng_.Chance(disk_full_rate_ * 5)) {
    FillDisk(" while a mutation runs");  // its outcome cannot be recorded
  }
  auto answer = [this, inc, done = std::move(done)](ExecOutcome o) mutable {
    if (inc != incarnation_ || AgentDead()) return;  // its caller is gone
    done(std::move(o));
  };
  if (clock_.Monotonic() < priv_down_until_ || rng_.Chance(rates_.priv_fail)) {
    // Refused before anything native started (privhelper down or refusing).
    ++counters_["priv_unavailable"];
    Post(rng_.Millis(0, 20), [answer]() mutable {
      ExecOutcome o;
      o.error_code = "unavailable";
      answer(std::move(o));
    });
    return;
  }
  const std::string& id = request.id;
  const int64_t g = request.generation;
  auto h = held_.find(g);
  if (h == held_.end() || h->second == HeldState::kDropped ||
      h->second == HeldState::kCollecting) {
    Violate(kReference, absl::StrCat("request ", id, " ran natively on generation ", g,
                                     " which privhelper no longer holds (",
                                     h == held_.end() ? "unknown" : "collected", ")"));
  }
  if (mutation) {
    NativeRun& run = native_[id];
    if (run.count > 0) {
      Violate(kRunsOnce, absl::StrCat("mutation ", id, " (", request.operation_name,
                                      ") started natively a second time; first at ",
                                      absl::FormatDuration(run.started)));
    } else {
      run.started = clock_.Monotonic();
    }
    ++run.count;
    dirty_.insert(id);
  }
  ++counters_["native_executions"];
  Event(absl::StrCat("native ", request.operation_name, " ", id));
  ++inflight_[g];
  ExecOutcome outcome = NativeOutcome(request);
  absl::Duration delay = rng_.Millis(1, 1500);
  if (rng_.Chance(rates_.priv_late)) {
    delay = std::max(remaining, absl::ZeroDuration()) + rng_.Millis(0, 20000);
    ++counters_["priv_late"];
  }
  bool lost = false;
  if (rng_.Chance(rates_.priv_restart)) {
    lost = true;
    priv_down_until_ = clock_.Monotonic() + delay + rng_.Millis(100, 3000);
    ++counters_["priv_restarts"];
  }
  Post(delay, [this, id, g, mutation, lost, outcome = std::move(outcome),
               answer = std::move(answer)]() mutable {
    --inflight_[g];
    if (mutation) {
      wire::RecordedResponse r;
      r.id = id;
      r.result = agent::ToMutationResult(outcome.result);
      r.error_code = outcome.error_code;
      native_[id].outcome = agent::ForRecord(std::move(r));
      dirty_.insert(id);
    }
    if (lost) {
      // privhelper restarted mid-call: the native work ran, its answer is
      // lost.
      ExecOutcome o;
      o.error_code = mutation ? "uncertain" : "unavailable";
      answer(std::move(o));
      return;
    }
    answer(std::move(outcome));
  });
}

std::unique_ptr<agent::CollectCall> World::Collect(const GenerationRef& ref,
                                            std::function<void(agent::CollectResult)> done) {
  auto st = std::make_shared<CollectState>();
  st->ref = ref;
  ++counters_["collect_calls"];
  Event(absl::StrCat("collect ", ref.generation));
  // The agent's decision, checked the moment it asks privhelper.
  const std::optional<std::string> live = LiveConnectionId();
  if (!live.has_value()) {
    Violate(kGrant, absl::StrCat("collection of generation ", ref.generation,
                                 " asked while the agent has no live connection"));
  } else {
    st->connection_id = *live;
    if (!grants_.count({*live, ref.generation})) {
      Violate(kGrant,
              absl::StrCat("collection of generation ", ref.generation, " asked on connection ",
                           *live, ", which granted no drop of it"));
    }
  }
  if (agent_ != nullptr) {
    const size_t calls = agent_->queue->CallsOn(ref.generation);
    std::optional<std::string> local = agent_->manager->LocalReference(ref);
    if (calls > 0 || local.has_value()) {
      Violate(kReference, absl::StrCat("collection of generation ", ref.generation,
                                       " asked while referenced: ", calls, " call(s), local ",
                                       local.value_or("none")));
    }
  }
  const uint64_t inc = incarnation_;
  Post(rng_.Millis(200, 20000), [this, st, inc, done = std::move(done)] {
    agent::CollectResult r;
    const int64_t g = st->ref.generation;
    if (st->cancelled) {
      r.outcome = agent::CollectOutcome::kFailed;
      r.reason = "the caller left";
    } else if (inflight_[g] > 0) {
      r.outcome = agent::CollectOutcome::kHeld;
      r.reason = "native helper running";
    } else {
      // The point of no return: still the granting connection?
      const std::optional<std::string> live = LiveConnectionId();
      if (inc != incarnation_ || !live.has_value() || *live != st->connection_id) {
        Violate(kGrant,
                absl::StrCat("generation ", g, " dropped after its granting connection ",
                             st->connection_id, " ended (now ", live.value_or("none"), ")"));
      }
      held_[g] = HeldState::kDropped;
      ++counters_["generations_dropped"];
      Event(absl::StrCat("dropped ", g));
      r.outcome = agent::CollectOutcome::kDropped;
      r.state = HeldState::kDropped;
    }
    if (inc != incarnation_ || AgentDead()) return;
    done(std::move(r));
  });
  class Handle final : public agent::CollectCall {
   public:
    explicit Handle(std::shared_ptr<CollectState> s) : s_(std::move(s)) {}
    void Cancel() override { s_->cancelled = true; }

   private:
    std::shared_ptr<CollectState> s_;
  };
  return std::make_unique<Handle>(st);
}

}  // namespace sn::sim::internal

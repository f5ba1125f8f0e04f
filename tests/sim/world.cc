// The seeded simulation (world.h): set-up, the step loop and the plumbing; the rest of the world
// is in world_*.cc (world_internal.h).
#include "tests/sim/world.h"

#include "tests/sim/world_internal.h"

namespace sn::sim::internal {

RunResult World::RunAll() {
  for (step_ = 1; step_ <= options_.steps; ++step_) {
    Step();
    if (!violation_.empty()) {
      result_.ok = false;
      result_.steps_run = step_;
      result_.invariant = violation_;
      result_.detail = violation_detail_;
      break;
    }
  }
  if (result_.ok) result_.steps_run = options_.steps;
  result_.trace_hash = hash_;
  result_.counters = counters_;
  return result_;
}

void World::Post(absl::Duration delay, std::function<void()> fn) {
  const uint64_t key = ++next_timer_;
  timers_[key] = clock_.After(delay, [this, key, fn = std::move(fn)] {
    timers_.erase(key);
    fn();
  });
}

void World::Hash(const std::string& text) {
  if (text.find("retention_ack") == std::string::npos) {
    HashInto(&hash_, text);
    return;
  }
  std::string copy = text;
  const size_t at = copy.find("\"id\":\"");
  if (at != std::string::npos) copy.erase(at, 6 + 36);
  HashInto(&hash_, copy);
}

void World::Event(std::string_view what) {
  HashInto(&hash_, what);
  if (options_.trace) {
    std::fprintf(stderr, "step %" PRIu64 " t=%s %.*s\n", step_,
                 absl::FormatDuration(clock_.Monotonic()).c_str(), static_cast<int>(what.size()),
                 what.data());
  }
}

void World::Violate(const char* name, std::string detail) {
  if (!violation_.empty()) return;
  violation_ = name;
  violation_detail_ = std::move(detail);
  Event(absl::StrCat("VIOLATION ", violation_, ": ", violation_detail_));
}

void SimTransport::Dial(size_t) { w_->Dial(); }
void SimTransport::Send(std::string text) { w_->AgentSend(std::move(text)); }
void SimTransport::Close(int code) { w_->AgentClose(code); }
void SimExecutor::Execute(const wire::Request& request, absl::Duration remaining,
                          std::function<void(ExecOutcome)> done) {
  w_->Execute(request, remaining, std::move(done));
}
std::unique_ptr<agent::CollectCall> SimCollector::Collect(
    const GenerationRef& ref, std::function<void(agent::CollectResult)> done) {
  return w_->Collect(ref, std::move(done));
}

}  // namespace sn::sim::internal

namespace sn::sim {

using internal::World;
using internal::kAbsent;
using internal::kAnswered;
using internal::kEpochs;
using internal::kGrant;
using internal::kNoPayload;
using internal::kObservable;
using internal::kOneRetention;
using internal::kReference;
using internal::kRestart;
using internal::kRunsOnce;

bool ParseBug(std::string_view name, Bug* bug) {
  for (Bug b : {Bug::kNone, Bug::kSkipRecordRecovery, Bug::kRetentionNotToldOfDisconnect,
                Bug::kVolatileOwnerEpoch}) {
    if (BugName(b) == name) {
      *bug = b;
      return true;
    }
  }
  return false;
}

std::string_view BugName(Bug bug) {
  switch (bug) {
    case Bug::kNone:
      return "none";
    case Bug::kSkipRecordRecovery:
      return "skip_record_recovery";
    case Bug::kRetentionNotToldOfDisconnect:
      return "retention_not_told_of_disconnect";
    case Bug::kVolatileOwnerEpoch:
      return "volatile_owner_epoch";
  }
  return "none";
}

const std::vector<InvariantInfo>& Invariants() {
  static const std::vector<InvariantInfo> kAll = {
      {kRunsOnce, "no mutation id runs twice natively"},
      {kObservable,
       "every accepted mutation is observable with its true final "
       "state for 24 h of simulated "
       "time"},
      {kAnswered,
       "an observe sent after Core had a mutation's final answer reports that same outcome "
       "(the record completes before the answer, or as the next start would)"},
      {kAbsent, "an answer is never not_found/absent without a complete inventory"},
      {kEpochs, "epochs never go down"},
      {kOneRetention, "at most one retention exchange pending"},
      {kGrant, "nothing is collected without a grant on the current connection"},
      {kReference, "nothing is collected while any reference is live"},
      {kNoPayload, "the durable record never holds arguments or outputs"},
      {kRestart, "the agent restarts from what is on disk (formats.md, Crash safety)"},
  };
  return kAll;
}

RunResult Run(const Options& options) {
  InitLogging("sim", static_cast<LogLevel>(static_cast<int>(LogLevel::kError) + 1));
  World world(options);
  return world.RunAll();
}

}  // namespace sn::sim

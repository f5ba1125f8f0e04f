// The step: the faults a seed draws, and Core's side of every connection (requests, retries, observe, retention acks, hostile frames) with the checks on what Core sees.
#include "tests/sim/world_internal.h"

namespace sn::sim::internal {

void World::Step() {
  HashInto(&hash_, "step");
  const bool alive = agent_ != nullptr && !AgentDead();
  if (alive && rng_.Chance(rates_.kill_agent)) {
    ++counters_["agent_kills"];
    Event("kill -9 of the agent");
    StopAgent(/*power_loss=*/false);
  } else if (alive && !crash_armed_ && rng_.Chance(rates_.crash_agent)) {
    crash_armed_ = true;
    fs_.CrashAtStep(fs_.steps() + 1 + rng_.Between(0, 5));
  }
  CoreActs();
  if (!disk_full_ && disk_rng_.Chance(disk_full_rate_)) FillDisk("");

  if (rng_.Chance(rates_.clock_jump)) {
    const absl::Duration d = rng_.Millis(-3600000, 3600000);
    wall_.Jump(d);
    ++counters_["clock_jumps"];
    Event(absl::StrCat("wall clock jumps ", absl::FormatDuration(d)));
  }
  absl::Duration dt;
  const uint64_t k = rng_.Below(100);
  if (k < 80) {
    dt = rng_.Millis(1, 500);
  } else if (k < 99) {
    dt = rng_.Millis(500, 5000);
  } else {
    dt = rng_.Millis(5000, 120000);
  }
  clock_.Advance(dt);
  if (agent_ != nullptr && AgentDead()) {
    ++counters_["agent_crashes"];
    Event("the agent crashed at a durable step");
    StopAgent(/*power_loss=*/true);
  }
  CheckRecords();
}

void World::FillDisk(absl::string_view why) {
  disk_full_ = true;
  fs_.SetByteBudget(0);
  ++counters_["disk_full"];
  Event(absl::StrCat("the state disk is full", why));
  const int64_t ms = disk_rng_.Between(1000, 300000);
  Post(absl::Milliseconds(ms), [this] {
    disk_full_ = false;
    fs_.SetByteBudget(std::nullopt);
    Event("the state disk has room again");
  });
  if (disk_rng_.Chance(0.5)) {
    // Restarted on the full disk (systemd's Restart=, an operator): its start must succeed.
    Post(disk_rng_.Millis(0, ms * 4 / 5), [this] {
      if (!disk_full_ || agent_ == nullptr || AgentDead()) return;
      ++counters_["agent_kills_on_full_disk"];
      Event("kill -9 of the agent on the full disk");
      StopAgent(/*power_loss=*/false);
    });
  }
}

void World::CoreActs() {
  if (clock_.Monotonic() < core_down_until_) return;
  if (rng_.Chance(rates_.core_restart)) {
    ++counters_["core_restarts"];
    ++core_epoch_;
    core_down_until_ = clock_.Monotonic() + rng_.Millis(200, 10000);
    Event(absl::StrCat("core restarts, epoch ", core_epoch_));
    for (auto& [serial, w] : wires_) {
      if (w.core_open) Cut(w);
    }
    return;
  }
  if (rng_.Chance(rates_.stale_core)) stale_armed_ = true;
  if (rng_.Chance(rates_.retarget)) Retarget();
  if (rng_.Chance(rates_.new_generation)) {
    const int64_t g = held_.rbegin()->first + 1;
    held_[g] = HeldState::kReady;
    Event(absl::StrCat("privhelper holds generation ", g));
  }
  Wire* w = Usable();
  if (w == nullptr) return;
  if (rng_.Chance(rates_.cut)) {
    ++counters_["cuts"];
    Cut(*w);
    return;
  }
  if (rng_.Chance(rates_.core_close)) {
    ++counters_["core_closes"];
    CoreClose(*w, rng_.Chance(0.5) ? 1001 : 1011);
    return;
  }
  if (rng_.Chance(rates_.hostile)) {
    Hostile(*w);
    return;
  }
  if (w->outstanding < wire::kMaxPendingRequests && rng_.Chance(rates_.request)) {
    NewRequest(*w);
  }
  if (w->outstanding < wire::kMaxPendingRequests && !mutation_ids_.empty() &&
      rng_.Chance(rates_.retry)) {
    const Mutation& m = mutations_.at(PickMutation());
    // The spec promises a mutation's record for 24 h after its completion (§5, "Durable
    // record"), which is after its first send: past that a retry could run again, so a Core
    // that keeps the promise's terms retries only within 24 h of the first send. (The node
    // keeps records 48 h by the wall clock; net forward jumps of the clock shorten that by
    // the jump: docs/protocol.md 12j. Seed 1863 of the campaign retried a kill 36 h later
    // with the clock +12 h: not the node's replay.)
    if (clock_.Monotonic() - m.first_sent <= absl::Hours(24)) {
      ++counters_["retries"];
      SendRequest(*w, m.request);
    } else {
      ++counters_["retries_past_24h_skipped"];
    }
  }
  if (w->outstanding < wire::kMaxPendingRequests && rng_.Chance(rates_.observe)) {
    Observe(*w);
  }
}

Wire* World::Usable() {
  if (current_ == 0) return nullptr;
  Wire& w = wires_.at(current_);
  if (!w.welcomed || !w.core_open || w.poisoned || w.stale) return nullptr;
  return &w;
}

std::string World::PickMutation() {
  if (mutation_ids_.size() > 64 && rng_.Chance(0.7)) {
    return mutation_ids_[mutation_ids_.size() - 1 - rng_.Below(64)];
  }
  return mutation_ids_[rng_.Below(mutation_ids_.size())];
}

void World::NewRequest(Wire& w) {
  wire::Request r;
  r.id = rng_.Uuid();
  r.generation = rng_.Chance(0.85) ? target_ : rng_.Between(1, held_.rbegin()->first);
  r.timeout_ms = rng_.Between(2000, 60000);
  const std::string& sandbox = sandboxes_[rng_.Below(sandboxes_.size())];
  const uint64_t k = rng_.Below(100);
  const std::string tag = absl::StrCat("SECRET-", ++secret_);
  if (k < 25) {
    r.operation = wire::Operation::kCreate;
    r.args =
        wire::CreateArgs{sandbox,
                         "busybox",
                         std::vector<std::string>{"sleep", "ARG-" + tag},
                         std::vector<std::pair<std::string, std::string>>{{"K", "ENV-" + tag}},
                         1000,
                         64 << 20};
  } else if (k < 50) {
    r.operation = wire::Operation::kExec;
    r.args = wire::ExecArgs{sandbox, {"echo", "ARG-" + tag}, std::string("STDIN-" + tag), 4096};
  } else if (k < 60) {
    r.operation = wire::Operation::kKill;
    r.args = wire::SandboxArgs{sandbox};
  } else if (k < 70) {
    r.operation = wire::Operation::kWriteFile;
    r.args = wire::WriteFileArgs{sandbox, "/PATH-" + tag, "CONTENT-" + tag, 0600};
  } else if (k < 90) {
    r.operation = wire::Operation::kInspect;
    r.args = wire::SandboxArgs{sandbox};
  } else {
    r.operation = wire::Operation::kReadFile;
    r.args = wire::ReadFileArgs{sandbox, "/etc/hostname", 1024};
  }
  r.operation_name = std::string(wire::OperationName(r.operation));
  if (wire::IsMutationRequest(r.operation, r.args)) {
    Mutation& m = mutations_[r.id];
    m.request = r;
    m.first_sent = clock_.Monotonic();
    mutation_ids_.push_back(r.id);
  }
  SendRequest(w, r);
}

void World::Observe(Wire& w) {
  wire::Request r;
  r.id = rng_.Uuid();
  r.generation = target_;
  r.timeout_ms = 10000;
  r.operation = wire::Operation::kObserve;
  r.operation_name = "observe";
  const std::string about =
      mutation_ids_.empty() || rng_.Chance(0.05) ? rng_.Uuid() : PickMutation();
  r.args = wire::ObserveArgs{about};
  SendRequest(w, r);
}

void World::SendRequest(Wire& w, wire::Request r) {
  r.connection_id = w.connection_id;
  r.owner_epoch = w.epoch;
  r.sequence = w.next_sequence++;
  Pending p;
  p.op = r.operation;
  p.mutation = wire::IsMutationRequest(r.operation, r.args);
  if (r.operation == wire::Operation::kObserve) {
    p.observed = std::get<wire::ObserveArgs>(r.args).operation_id;
  }
  if (p.mutation) {
    dirty_.insert(r.id);
    Mutation& m = mutations_[r.id];
    p.send_no = ++m.sends;
    m.answered_at.reset();  // this send may be admitted anew (an earlier one was not recorded)
  }
  p.sent = clock_.Monotonic();
  w.pending[r.id].push_back(std::move(p));
  ++w.outstanding;
  ++counters_["requests_sent"];
  ToAgent(w, wire::Encode(wire::Frame(r)));
}

void World::Retarget() {
  std::vector<int64_t> ready;
  for (const auto& [g, s] : held_) {
    if (s == HeldState::kReady && !ever_granted_.count(g)) ready.push_back(g);
  }
  if (ready.empty()) return;
  target_ = ready[rng_.Below(ready.size())];
  ++counters_["retargets"];
  Event(absl::StrCat("core targets generation ", target_));
}

wire::Deployment World::DeploymentFacts() const {
  return wire::Deployment{target_, Digest(target_), target_};
}

void World::Hostile(Wire& w) {
  ++counters_["hostile_frames"];
  w.poisoned = true;
  const uint64_t k = rng_.Below(6);
  Event(absl::StrCat("hostile frame kind ", k));
  switch (k) {
    case 0:
      ToAgent(w, "{\"type\":\"request\",", true);
      return;
    case 1:
      ToAgent(w, "binary", false);
      return;
    case 2:
    case 3: {
      wire::Request r;
      r.id = rng_.Uuid();
      r.connection_id = k == 2 ? rng_.Uuid() : w.connection_id;
      r.owner_epoch = k == 3 ? w.epoch - 1 : w.epoch;
      r.sequence = w.next_sequence;
      r.generation = target_;
      r.operation = wire::Operation::kKill;
      r.operation_name = "kill";
      r.timeout_ms = 5000;
      r.args = wire::SandboxArgs{sandboxes_[0]};
      mutations_[r.id].request = r;  // should it run, Core would want to know
      mutations_[r.id].first_sent = clock_.Monotonic();
      ToAgent(w, wire::Encode(wire::Frame(r)));
      return;
    }
    case 4: {
      // A replayed or unsolicited retention_ack granting drops.
      if (last_ack_.has_value()) {
        ToAgent(w, wire::Encode(wire::Frame(*last_ack_)));
        return;
      }
      wire::RetentionAck a;
      a.id = rng_.Uuid();
      a.sequence = 1;
      a.connection_id = w.connection_id;
      a.owner_epoch = w.epoch;
      a.entries.push_back({2, Digest(2), false});
      ToAgent(w, wire::Encode(wire::Frame(a)));
      return;
    }
    default: {
      wire::HeartbeatAck a;
      a.connection_id = rng_.Uuid();
      a.owner_epoch = w.epoch;
      a.deployment = DeploymentFacts();
      ToAgent(w, wire::Encode(wire::Frame(a)));
      return;
    }
  }
}

void World::CoreReceive(Wire& w, const std::string& text) {
  absl::StatusOr<wire::Frame> f = wire::Decode(text, wire::Role::kCore);
  if (!f.ok()) {
    ++counters_["agent_frames_undecodable"];
    Event(absl::StrCat("undecodable frame from the agent: ", f.status().ToString()));
    CoreClose(w, wire::kCloseInvalidFrame);
    return;
  }
  switch (wire::TypeOf(*f)) {
    case wire::FrameType::kHello: {
      if (w.welcomed) return;
      wire::Welcome welcome;
      welcome.connection_id = w.connection_id = rng_.Uuid();
      welcome.owner_epoch = w.epoch;
      welcome.deployment = DeploymentFacts();
      w.welcomed = true;
      Event(absl::StrCat("hello; welcome epoch ", w.epoch, w.stale ? " (stale core)" : ""));
      ToAgent(w, wire::Encode(wire::Frame(welcome)));
      return;
    }
    case wire::FrameType::kHeartbeat: {
      ++counters_["heartbeats"];
      if (w.poisoned) return;
      wire::HeartbeatAck a;
      a.connection_id = w.connection_id;
      a.owner_epoch = w.epoch;
      a.deployment = DeploymentFacts();
      ToAgent(w, wire::Encode(wire::Frame(a)));
      return;
    }
    case wire::FrameType::kRetention:
      CoreRetention(w, std::get<wire::Retention>(*f));
      return;
    case wire::FrameType::kResponse:
      CoreResponse(w, std::get<wire::Response>(*f));
      return;
    default:
      ++counters_["agent_frames_unexpected"];
      return;
  }
}

void World::CoreRetention(Wire& w, const wire::Retention& r) {
  ++counters_["retention_exchanges"];
  std::string gens;
  for (const auto& e : r.entries) absl::StrAppend(&gens, " ", e.generation);
  Event(absl::StrCat("retention seq=", r.sequence, gens));
  if (w.retention_outstanding) {
    Violate(kOneRetention,
            absl::StrCat("retention sequence ", r.sequence, " on connection ", w.connection_id,
                         " while the previous exchange is unanswered"));
  }
  w.retention_outstanding = true;
  if (w.poisoned || rng_.Chance(rates_.no_ack)) return;  // the agent closes 4008 at 30 s
  const absl::Duration delay =
      rng_.Chance(rates_.slow_ack) ? rng_.Millis(20000, 40000) : rng_.Millis(5, 2000);
  wire::RetentionAck a;
  a.id = r.id;
  a.sequence = r.sequence;
  a.connection_id = r.connection_id;
  a.owner_epoch = r.owner_epoch;
  for (const auto& e : r.entries) {
    const bool keep = e.generation == target_ || !rng_.Chance(rates_.drop_grant);
    a.entries.push_back({e.generation, e.specification_digest, keep});
  }
  const uint64_t serial = w.serial;
  Post(delay, [this, serial, a = std::move(a)] {
    Wire& w = wires_.at(serial);
    if (!w.core_open || w.poisoned) return;
    for (const auto& e : a.entries) {
      if (!e.keep.value_or(true) && e.generation != target_) {
        grants_.insert({w.connection_id, e.generation});
        ever_granted_.insert(e.generation);
        ++counters_["drop_grants"];
      } else if (!e.keep.value_or(true)) {
        // The target may have moved onto it meanwhile: keep it.
      }
    }
    wire::RetentionAck sent = a;
    for (auto& e : sent.entries) {
      if (e.generation == target_) e.keep = true;
    }
    w.retention_outstanding = false;
    last_ack_ = sent;
    ToAgent(w, wire::Encode(wire::Frame(sent)));
  });
}

void World::CoreResponse(Wire& w, const wire::Response& resp) {
  auto it = w.pending.find(resp.id);
  if (it == w.pending.end() || it->second.empty()) {
    ++counters_["responses_unexpected"];
    return;
  }
  Pending p = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) w.pending.erase(it);
  --w.outstanding;
  ++counters_["responses"];
  std::optional<wire::Result> result;
  if (resp.raw_result.has_value()) {
    absl::StatusOr<wire::Result> r = wire::DecodeResult(p.op, *resp.raw_result);
    if (!r.ok()) {
      ++counters_["results_undecodable"];
      return;
    }
    result = *r;
  }
  ++counters_[absl::StrCat("answer_", resp.error_code.value_or("success"))];
  if (p.op == wire::Operation::kObserve) {
    if (result.has_value()) {
      CheckObserve(p.observed, p.sent, std::get<wire::ObserveResult>(*result));
    }
    return;
  }
  if (!p.mutation) return;
  Mutation& m = mutations_[resp.id];
  const std::string code = resp.error_code.value_or("");
  if (code != "uncertain" && p.send_no == m.sends) {
    m.answered_at = clock_.Monotonic();
    m.answered_code = code.empty() ? "success" : code;
  }
  if (code.empty()) {
    wire::RecordedResponse r;
    r.id = resp.id;
    r.result = agent::ToMutationResult(result);
    r = agent::ForRecord(std::move(r));
    if (!m.accepted_at) m.accepted_at = clock_.Monotonic();
    Definite(m, r, "response");
  } else if (code == "uncertain" || code == "conflict") {
    if (!m.accepted_at) m.accepted_at = clock_.Monotonic();
    if (code == "conflict") {
      wire::RecordedResponse r;
      r.id = resp.id;
      r.error_code = code;
      Definite(m, r, "response");
    }
  }
}

void World::Definite(Mutation& m, const wire::RecordedResponse& r, const std::string& how) {
  const std::string& id = m.request.id;
  if (m.final.has_value() && *m.final != r) {
    Violate(kObservable,
            absl::StrCat(how, " for ", id, " says ", wire::EncodeRecordedResponse(r),
                         " but Core learned ", wire::EncodeRecordedResponse(*m.final)));
    return;
  }
  if (r.result.has_value() || (!r.error_code.has_value())) {
    auto n = native_.find(id);
    if (n == native_.end() || !n->second.outcome.has_value() || *n->second.outcome != r) {
      Violate(kObservable,
              absl::StrCat(how, " for ", id, " reports success ", wire::EncodeRecordedResponse(r),
                           " that privhelper did not return (native: ",
                           n == native_.end() || !n->second.outcome
                               ? std::string("none")
                               : wire::EncodeRecordedResponse(*n->second.outcome),
                           ")"));
      return;
    }
  }
  m.final = r;
}

void World::CheckObserve(const std::string& id, MonoTime sent, const wire::ObserveResult& o) {
  const MonoTime now = clock_.Monotonic();
  auto m = mutations_.find(id);
  auto n = native_.find(id);
  if (o.state == wire::ObserveState::kUnknown) {
    ++counters_["observe_unknown"];
    if (m != mutations_.end() && m->second.accepted_at.has_value() &&
        *m->second.accepted_at <= sent && now - *m->second.accepted_at <= absl::Hours(24)) {
      Violate(kObservable,
              absl::StrCat("observe says unknown for ", id, ", accepted ",
                           absl::FormatDuration(now - *m->second.accepted_at), " ago"));
    } else if (n != native_.end() && n->second.started <= sent &&
               now - n->second.started <= absl::Hours(24)) {
      Violate(kAbsent, absl::StrCat("observe says unknown for ", id, ", which ran natively ",
                                    absl::FormatDuration(now - n->second.started), " ago"));
    }
    return;
  }
  ++counters_["observe_known"];
  if (m == mutations_.end()) {
    Violate(kAbsent, absl::StrCat("observe knows ", id, ", which Core never sent"));
    return;
  }
  if (m->second.answered_at.has_value() && *m->second.answered_at <= sent) {
    // Core had the final answer to the latest send of this id before it asked: the record
    // says the same (the 2-hour soak's observe_agrees; docs/reliability.md finding 7).
    ++counters_["observe_after_answer"];
    const std::string said =
        o.state != wire::ObserveState::kCompleted || !o.response.has_value()
            ? std::string(o.state == wire::ObserveState::kQueued ? "queued" : "running")
            : o.response->error_code.value_or("success");
    if (said != m->second.answered_code) {
      Violate(kAnswered, absl::StrCat("observe says ", said, " for ", id, ", answered ",
                                      m->second.answered_code, " ",
                                      absl::FormatDuration(now - *m->second.answered_at),
                                      " before it was asked"));
      return;
    }
  }
  if (!m->second.accepted_at) m->second.accepted_at = now;
  if (o.state != wire::ObserveState::kCompleted || !o.response.has_value()) return;
  const wire::RecordedResponse& r = *o.response;
  if (r.error_code == "uncertain") return;  // honest: it may or may not have happened
  if (r.result.has_value() || !r.error_code.has_value() || r.error_code == "conflict") {
    Definite(m->second, r, "observe");
  } else if (m->second.final.has_value()) {
    Violate(kObservable,
            absl::StrCat("observe for ", id, " says ", wire::EncodeRecordedResponse(r),
                         " but Core learned ", wire::EncodeRecordedResponse(*m->second.final)));
  }
}

ExecOutcome World::NativeOutcome(const wire::Request& r) {
  ExecOutcome o;
  const std::string sandbox = agent::SandboxOf(r.args);
  switch (r.operation) {
    case wire::Operation::kCreate:
      o.result =
          wire::Result(wire::CreateResult{sandbox, absl::StrCat("native-", ++native_serial_)});
      break;
    case wire::Operation::kExec:
      o.result = wire::Result(wire::ExecResult{static_cast<int64_t>(rng_.Below(3)),
                                               absl::StrCat("OUT-SECRET-", ++native_serial_), "",
                                               false});
      break;
    case wire::Operation::kWriteFile:
      o.result = wire::Result(wire::WriteFileResult{
          static_cast<int64_t>(std::get<wire::WriteFileArgs>(r.args).content.size())});
      break;
    case wire::Operation::kInspect:
      o.result = wire::Result(
          wire::InspectResult{sandbox, wire::SandboxState::kRunning, std::string("native-0")});
      break;
    case wire::Operation::kReadFile:
      o.result = wire::Result(wire::ReadFileResult{"node\n", 5, false});
      break;
    default:
      break;  // kill and the others: a success without a result
  }
  if (rng_.Chance(0.05)) {  // the provider's own error
    o.result.reset();
    o.error_code = "unavailable";
  }
  return o;
}

}  // namespace sn::sim::internal

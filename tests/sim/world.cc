#include "tests/sim/world.h"

#include <cinttypes>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/connection/connection.h"
#include "agent/connection/retention_control.h"
#include "agent/generations/collector.h"
#include "agent/generations/manager.h"
#include "agent/generations/pins.h"
#include "agent/generations/retention.h"
#include "agent/generations/retention_file.h"
#include "agent/requests/executor.h"
#include "agent/requests/operation_record.h"
#include "agent/requests/request_queue.h"
#include "agent/state/state_files.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/wire/codec.h"
#include "common/wire/limits.h"
#include "tests/agent/fakes/connection_seams.h"
#include "tests/agent/fakes/fake_preparer.h"
#include "tests/fakes/fault_fs.h"

namespace sn::sim {
namespace {

using agent::Connection;
using agent::ExecOutcome;
using agent::GenerationRef;
using agent::HeldState;
using fs::FaultFs;

constexpr char kNodeId[] = "11111111-1111-4111-8111-111111111111";
constexpr char kInstallationId[] = "22222222-2222-4222-8222-222222222222";
constexpr char kOperationsDir[] = "state/operations";
constexpr char kEpochPath[] = "state/node/owner_epoch";
constexpr char kPinsPath[] = "state/node/pins.json";
constexpr char kRetentionPath[] = "state/node/retention.json";
constexpr int kSandboxes = 6;

// The names of the invariants (Invariants() holds their requirement words).
constexpr char kRunsOnce[] = "mutation_runs_once";
constexpr char kObservable[] = "accepted_observable_24h";
constexpr char kAbsent[] = "absent_needs_inventory";
constexpr char kEpochs[] = "epochs_never_decrease";
constexpr char kOneRetention[] = "one_retention_pending";
constexpr char kGrant[] = "collect_needs_current_grant";
constexpr char kReference[] = "collect_needs_no_reference";
constexpr char kNoPayload[] = "record_holds_no_payload";
constexpr char kRestart[] = "restarts_from_disk";

std::string Digest(int64_t g) {
  std::string d(64, '0');
  std::string n = std::to_string(g);
  d.replace(64 - n.size(), n.size(), n);
  return d;
}

// FNV-1a.
void HashInto(uint64_t* h, std::string_view s) {
  for (unsigned char c : s) {
    *h ^= c;
    *h *= 1099511628211ull;
  }
  *h ^= 0xff;
  *h *= 1099511628211ull;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  uint64_t Next() { return g_(); }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(g_() >> 11) * (1.0 / 9007199254740992.0); }
  bool Chance(double p) { return p > 0 && Uniform() < p; }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : g_() % n; }
  int64_t Between(int64_t lo, int64_t hi) {  // inclusive
    return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo + 1)));
  }
  absl::Duration Millis(int64_t lo, int64_t hi) { return absl::Milliseconds(Between(lo, hi)); }
  std::string Uuid() {
    const uint64_t a = Next(), b = Next();
    char buf[40];
    std::snprintf(buf, sizeof(buf),
                  "%08" PRIx64 "-%04" PRIx64 "-4%03" PRIx64 "-8%03" PRIx64 "-%012" PRIx64, a >> 32,
                  (a >> 16) & 0xffff, a & 0xfff, b >> 52, b & uint64_t{0xffffffffffff});
    return buf;
  }

 private:
  std::mt19937_64 g_;
};

// The fault rates a seed chooses: each base rate scaled by a factor in [0, 2),
// and switched off altogether for one seed in eight, so some runs isolate the
// others.
struct Rates {
  // Per step.
  double request = 0.3, retry = 0.04, observe = 0.08, hostile = 0.001, core_close = 0.0008,
         cut = 0.0015, core_restart = 0.0004, stale_core = 0.0004, kill_agent = 0.0004,
         crash_agent = 0.0008, clock_jump = 0.0004, retarget = 0.0006, new_generation = 0.0006;
  // Per frame, call or exchange.
  double frame_delay = 0.02, priv_late = 0.05, priv_fail = 0.03, priv_restart = 0.02, no_ack = 0.01,
         slow_ack = 0.02, drop_grant = 0.4, dial_refused = 0.05;

  void Choose(Rng& rng) {
    for (double* r :
         {&hostile, &core_close, &cut, &core_restart, &stale_core, &kill_agent, &crash_agent,
          &clock_jump, &retarget, &new_generation, &frame_delay, &priv_late, &priv_fail,
          &priv_restart, &no_ack, &slow_ack, &retry, &dial_refused}) {
      *r = rng.Below(8) == 0 ? 0.0 : *r * 2.0 * rng.Uniform();
    }
    drop_grant = rng.Uniform();
  }
  std::string Describe() const {
    return absl::StrCat(
        "request=", request, " retry=", retry, " observe=", observe, " hostile=", hostile,
        " core_close=", core_close, " cut=", cut, " core_restart=", core_restart,
        " stale_core=", stale_core, " kill_agent=", kill_agent, " crash_agent=", crash_agent,
        " clock_jump=", clock_jump, " retarget=", retarget, " new_generation=", new_generation,
        " frame_delay=", frame_delay, " priv_late=", priv_late, " priv_fail=", priv_fail,
        " priv_restart=", priv_restart, " no_ack=", no_ack, " slow_ack=", slow_ack,
        " drop_grant=", drop_grant, " dial_refused=", dial_refused);
  }
};

// Wall-clock time that can jump (both ways) while monotonic time only moves
// forward.
class WallClock final : public Clock {
 public:
  explicit WallClock(const SimulatedClock* base) : base_(base) {}
  absl::Time Now() const override { return base_->Now() + offset_; }
  MonoTime Monotonic() const override { return base_->Monotonic(); }
  void Jump(absl::Duration d) { offset_ += d; }

 private:
  const SimulatedClock* base_;
  absl::Duration offset_ = absl::ZeroDuration();
};

// Bug kVolatileOwnerEpoch: an epoch store that keeps the epoch in memory only.
class VolatileEpochStore final : public agent::EpochStore {
 public:
  absl::StatusOr<int64_t> Load() override { return stored_; }
  absl::Status Store(int64_t epoch) override {
    stored_ = epoch;
    return absl::OkStatus();
  }

 private:
  int64_t stored_ = 0;
};

// Bug kRetentionNotToldOfDisconnect: the end of a connection never reaches the
// decisions.
class ForgetfulRetention final : public agent::RetentionControl {
 public:
  explicit ForgetfulRetention(agent::RetentionControl* inner) : inner_(inner) {}
  void OnLive() override { inner_->OnLive(); }
  void OnLiveEnded() override {}
  std::vector<wire::RetentionEntry> NextRetentionRequest() override {
    return inner_->NextRetentionRequest();
  }
  void OnRetentionAnswer(const std::vector<wire::RetentionEntry>& answers) override {
    inner_->OnRetentionAnswer(answers);
  }

 private:
  agent::RetentionControl* inner_;
};

class World;

class SimTransport final : public agent::Transport {
 public:
  explicit SimTransport(World* w) : w_(w) {}
  void SetEvents(agent::TransportEvents* events) override { events_ = events; }
  void Dial(size_t read_limit) override;
  void SetReadLimit(size_t) override {}
  void Send(std::string text) override;
  void Close(int code) override;
  agent::TransportEvents* events() const { return events_; }
  void Detach() { events_ = nullptr; }

 private:
  World* w_;
  agent::TransportEvents* events_ = nullptr;
};

class SimExecutor final : public agent::OperationExecutor {
 public:
  explicit SimExecutor(World* w) : w_(w) {}
  void Execute(const wire::Request& request, absl::Duration remaining_budget,
               std::function<void(ExecOutcome)> done) override;

 private:
  World* w_;
};

class SimCollector final : public agent::GenerationCollector {
 public:
  explicit SimCollector(World* w) : w_(w) {}
  std::unique_ptr<agent::CollectCall> Collect(
      const GenerationRef& ref, std::function<void(agent::CollectResult)> done) override;

 private:
  World* w_;
};

// One process of the agent: what a start builds (agent/cli/run.cc's wiring, on
// the seams).
struct Agent {
  std::unique_ptr<agent::EpochStore> epochs;
  std::unique_ptr<agent::FilePinStore> pins;
  agent::testing::FakePreparer preparer;
  agent::testing::FakeHealth health;
  std::unique_ptr<agent::GenerationManager> manager;
  std::unique_ptr<agent::OperationRecord> record;
  std::unique_ptr<agent::RequestQueue> queue;
  std::unique_ptr<agent::RetentionDecisions> retention;
  std::unique_ptr<ForgetfulRetention> forgetful;
  std::unique_ptr<Connection> conn;  // last: destroyed first
};

// What Core waits for on one connection.
struct Pending {
  wire::Operation op = wire::Operation::kInspect;
  bool mutation = false;
  std::string observed;  // observe: the operation it asks about
  MonoTime sent;         // when Core sent it
};

// One WebSocket between the agent and a Core instance, with Core's state of it.
struct Wire {
  uint64_t serial = 0;
  bool stale = false;  // served by a superseded Core instance (a lower epoch)
  int64_t epoch = 0;
  std::string connection_id;
  bool welcomed = false;
  bool poisoned = false;   // Core sent a bad frame: it sends nothing more
  bool core_open = true;   // Core still reads and writes
  bool agent_open = true;  // the agent's OnClosed is not delivered yet
  bool agent_closing = false;
  MonoTime next_to_agent = absl::ZeroDuration();
  MonoTime next_to_core = absl::ZeroDuration();
  int64_t next_sequence = 1;
  std::map<std::string, std::deque<Pending>> pending;
  size_t outstanding = 0;
  bool retention_outstanding = false;
};

// Core's knowledge of one mutation it sent.
struct Mutation {
  wire::Request request;  // as first sent (a retry re-sends it with a new envelope)
  std::optional<MonoTime> accepted_at;
  std::optional<wire::RecordedResponse> final;  // a definite outcome Core learned
};

// privhelper's truth about one native execution.
struct NativeRun {
  MonoTime started;
  int count = 0;
  std::optional<wire::RecordedResponse> outcome;  // as the record would hold it
};

struct CollectState {
  GenerationRef ref;
  std::string connection_id;  // the agent's live connection when it asked
  bool cancelled = false;
};

FaultFs::Options SimFsOptions() {
  FaultFs::Options o;
  o.uid = 1000;  // the agent's user
  o.gid = 1000;
  o.gc_every = 512;
  o.keep_step_log = false;
  return o;
}

class World {
 public:
  explicit World(const Options& o)
      : options_(o),
        rng_(o.seed),
        disk_rng_(o.seed ^ 0x9e3779b97f4a7c15ull),
        wall_(&clock_),
        transport_(this),
        executor_(this),
        collector_(this) {
    rates_.Choose(rng_);
    disk_full_rate_ = disk_rng_.Below(8) == 0 ? 0.0 : 0.0004 * 2.0 * disk_rng_.Uniform();
    result_.fault_rates = absl::StrCat(rates_.Describe(), " disk_full=", disk_full_rate_);
    (void)fs_.MakeDirs("state/node");
    for (int64_t g = 1; g <= 4; ++g) held_[g] = HeldState::kReady;
    for (int i = 0; i < kSandboxes; ++i) sandboxes_.push_back(rng_.Uuid());
    Post(absl::ZeroDuration(), [this] { StartAgent(); });
    Post(absl::Seconds(30), [this] { Probe(); });
  }

  ~World() {
    transport_.Detach();
    agent_.reset();
  }

  RunResult RunAll() {
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

  // ---- transport ----
  void Dial() {
    if (AgentDead()) return;
    const uint64_t inc = incarnation_;
    Post(rng_.Millis(1, 200), [this, inc] {
      if (inc != incarnation_ || agent_ == nullptr || transport_.events() == nullptr) return;
      agent::DialResult r;
      if (clock_.Monotonic() < core_down_until_) {
        r.kind = agent::DialResult::Kind::kTransportError;
        Event("dial unreachable");
        transport_.events()->OnDialResult(r);
        return;
      }
      if (rng_.Chance(rates_.dial_refused)) {
        r.kind = agent::DialResult::Kind::kHttpStatus;
        r.http_status = 503;
        Event("dial 503");
        transport_.events()->OnDialResult(r);
        return;
      }
      Wire w;
      w.serial = ++next_serial_;
      w.stale = stale_armed_ && core_epoch_ > 1;
      stale_armed_ = false;
      w.epoch = w.stale ? core_epoch_ - 1 : core_epoch_;
      w.next_to_agent = w.next_to_core = clock_.Monotonic();
      current_ = w.serial;
      wires_[w.serial] = std::move(w);
      ++counters_["dials_upgraded"];
      Event(absl::StrCat("dial upgraded serial=", current_));
      r.kind = agent::DialResult::Kind::kUpgraded;
      r.http_status = 101;
      transport_.events()->OnDialResult(r);
    });
  }

  void AgentSend(std::string text) {
    if (AgentDead() || current_ == 0) return;
    Wire& w = wires_.at(current_);
    if (w.agent_closing || !w.agent_open) return;
    const uint64_t serial = w.serial;
    const MonoTime at = Latency(&w.next_to_core);
    Post(at - clock_.Monotonic(), [this, serial, text = std::move(text)] {
      auto it = wires_.find(serial);
      if (it == wires_.end() || !it->second.core_open) return;
      CoreReceive(it->second, text);
    });
  }

  void AgentClose(int code) {
    if (AgentDead() || current_ == 0) return;
    Wire& w = wires_.at(current_);
    if (w.agent_closing) return;
    w.agent_closing = true;
    const uint64_t serial = w.serial;
    Event(absl::StrCat("agent closes serial=", serial, " code=", code));
    ++counters_[absl::StrCat("agent_close_", code)];
    const MonoTime at = Latency(&w.next_to_core);
    Post(at - clock_.Monotonic(), [this, serial, code] {
      Wire& w = wires_.at(serial);
      if (!w.core_open) {
        // Core is gone: the transport bounds the handshake.
        AgentClosed(serial, agent::CloseInfo{false, 0, "close handshake timed out"},
                    absl::Seconds(1));
        return;
      }
      w.core_open = false;  // Core echoes the close frame
      AgentClosed(serial, agent::CloseInfo{true, code, "echo"}, rng_.Millis(1, 50));
    });
  }

  // ---- privhelper ----
  void Execute(const wire::Request& request, absl::Duration remaining,
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

  std::unique_ptr<agent::CollectCall> Collect(const GenerationRef& ref,
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

 private:
  // ---- the step ----
  void Step() {
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

  // The state disk fills up (another program's files): every write that needs a byte fails
  // with ENOSPC until it has room again, 1 s to 5 min later.
  void FillDisk(absl::string_view why) {
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

  void CoreActs() {
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
      ++counters_["retries"];
      const Mutation& m = mutations_.at(PickMutation());
      SendRequest(*w, m.request);
    }
    if (w->outstanding < wire::kMaxPendingRequests && rng_.Chance(rates_.observe)) {
      Observe(*w);
    }
  }

  // The wire Core uses: welcomed, open, not poisoned, not a stale instance's.
  Wire* Usable() {
    if (current_ == 0) return nullptr;
    Wire& w = wires_.at(current_);
    if (!w.welcomed || !w.core_open || w.poisoned || w.stale) return nullptr;
    return &w;
  }

  std::string PickMutation() {
    if (mutation_ids_.size() > 64 && rng_.Chance(0.7)) {
      return mutation_ids_[mutation_ids_.size() - 1 - rng_.Below(64)];
    }
    return mutation_ids_[rng_.Below(mutation_ids_.size())];
  }

  void NewRequest(Wire& w) {
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
      mutations_[r.id].request = r;
      mutation_ids_.push_back(r.id);
    }
    SendRequest(w, r);
  }

  void Observe(Wire& w) {
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

  void SendRequest(Wire& w, wire::Request r) {
    r.connection_id = w.connection_id;
    r.owner_epoch = w.epoch;
    r.sequence = w.next_sequence++;
    Pending p;
    p.op = r.operation;
    p.mutation = wire::IsMutationRequest(r.operation, r.args);
    if (r.operation == wire::Operation::kObserve) {
      p.observed = std::get<wire::ObserveArgs>(r.args).operation_id;
    }
    if (p.mutation) dirty_.insert(r.id);
    p.sent = clock_.Monotonic();
    w.pending[r.id].push_back(std::move(p));
    ++w.outstanding;
    ++counters_["requests_sent"];
    ToAgent(w, wire::Encode(wire::Frame(r)));
  }

  void Retarget() {
    std::vector<int64_t> ready;
    for (const auto& [g, s] : held_) {
      if (s == HeldState::kReady && !ever_granted_.count(g)) ready.push_back(g);
    }
    if (ready.empty()) return;
    target_ = ready[rng_.Below(ready.size())];
    ++counters_["retargets"];
    Event(absl::StrCat("core targets generation ", target_));
  }

  wire::Deployment DeploymentFacts() const {
    return wire::Deployment{target_, Digest(target_), target_};
  }

  void Hostile(Wire& w) {
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

  // ---- Core's side of a wire ----
  void CoreReceive(Wire& w, const std::string& text) {
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

  void CoreRetention(Wire& w, const wire::Retention& r) {
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

  void CoreResponse(Wire& w, const wire::Response& resp) {
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

  // Core learned a definite outcome of `m` (a success or a conflict): it must
  // agree with what it learned before and, for a success, with what
  // privhelper's native execution returned.
  void Definite(Mutation& m, const wire::RecordedResponse& r, const std::string& how) {
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

  // `sent`: when Core sent the observe. An `unknown` is wrong only about a mutation accepted
  // before that: one Core sends (again) after its observe may be accepted after the agent
  // answered the observe, in the connection's order (a mutation refused unrecorded, e.g. on a
  // full state disk, and then retried, is unknown until the retry).
  void CheckObserve(const std::string& id, MonoTime sent, const wire::ObserveResult& o) {
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


  ExecOutcome NativeOutcome(const wire::Request& r) {
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

  // ---- the wire's mechanics ----
  MonoTime Latency(MonoTime* next) {
    absl::Duration lat = rng_.Millis(1, 40);
    if (rng_.Chance(rates_.frame_delay)) {
      lat = rng_.Millis(100, 20000);
      ++counters_["frames_delayed"];
    }
    // Never reordered within one WebSocket.
    *next = std::max(*next, clock_.Monotonic() + lat);
    return *next;
  }

  void ToAgent(Wire& w, std::string text, bool is_text = true) {
    if (!w.core_open) return;
    Hash(text);
    if (options_.trace) std::fprintf(stderr, "  core> %s\n", text.c_str());
    const uint64_t serial = w.serial;
    const MonoTime at = Latency(&w.next_to_agent);
    Post(at - clock_.Monotonic(), [this, serial, is_text, text = std::move(text)]() mutable {
      Wire& w = wires_.at(serial);
      if (!w.agent_open || w.agent_closing || serial != current_ || AgentDead() ||
          transport_.events() == nullptr) {
        return;
      }
      transport_.events()->OnActivity();
      transport_.events()->OnMessage(std::move(text), is_text);
    });
  }

  void AgentClosed(uint64_t serial, agent::CloseInfo info, absl::Duration delay) {
    const uint64_t inc = incarnation_;
    Post(delay, [this, serial, inc, info] {
      Wire& w = wires_.at(serial);
      if (!w.agent_open) return;
      w.agent_open = false;
      if (serial == current_) current_ = 0;
      if (inc != incarnation_ || AgentDead() || transport_.events() == nullptr) return;
      transport_.events()->OnClosed(info);
    });
  }

  // The TCP connection breaks: no close frame either way.
  void Cut(Wire& w) {
    Event(absl::StrCat("cut serial=", w.serial));
    w.core_open = false;
    AgentClosed(w.serial, agent::CloseInfo{false, 0, "cut"}, rng_.Millis(1, 3000));
  }

  void CoreClose(Wire& w, int code) {
    Event(absl::StrCat("core closes serial=", w.serial, " code=", code));
    const MonoTime at = Latency(&w.next_to_agent);
    w.core_open = false;
    AgentClosed(w.serial, agent::CloseInfo{true, code, "core closed"}, at - clock_.Monotonic());
  }

  // ---- the agent's processes ----
  bool AgentDead() const { return agent_ == nullptr || fs_.crashed(); }

  std::optional<std::string> LiveConnectionId() const {
    if (agent_ == nullptr || agent_->conn == nullptr ||
        agent_->conn->state() != Connection::State::kLive || !agent_->conn->live()) {
      return std::nullopt;
    }
    return agent_->conn->live()->connection_id;
  }

  void StartAgent() {
    ++incarnation_;
    crash_armed_ = false;
    if (disk_full_) ++counters_["agent_starts_on_full_disk"];
    Event(absl::StrCat("agent starts, incarnation ", incarnation_));
    agent_ = std::make_unique<Agent>();
    Agent& a = *agent_;
    a.health.report.health.observed_at = "2026-12-06T12:00:00Z";
    a.health.report.health.host.cpu_cores = 2;
    a.health.report.health.host.load_1m = "0.25";
    a.health.report.health.host.memory_total_bytes = 1 << 30;
    a.health.report.health.host.memory_available_bytes = 1 << 29;
    a.health.report.backend_fingerprint = "sim";
    if (options_.bug == Bug::kVolatileOwnerEpoch) {
      a.epochs = std::make_unique<VolatileEpochStore>();
    } else {
      a.epochs = std::make_unique<agent::FileEpochStore>(kEpochPath, &fs_);
    }
    a.pins = std::make_unique<agent::FilePinStore>(kPinsPath, &fs_);
    agent::GenerationManagerOptions mo;
    mo.generation_management = true;
    mo.enrolled = {1, Digest(1)};
    a.manager = std::make_unique<agent::GenerationManager>(
        mo, &wall_, &clock_, a.pins.get(), &a.preparer,
        [](const GenerationRef&) -> std::optional<std::set<std::string>> {
          return std::set<std::string>{"busybox"};
        });
    absl::Status st = a.manager->Start();
    if (!st.ok() && !fs_.crashed()) {
      Violate(kRestart, absl::StrCat("generation manager: ", st.ToString()));
    }
    a.record = std::make_unique<agent::OperationRecord>(kOperationsDir, &wall_,
                                                        agent::kMaxOperationRecords, &fs_);
    if (options_.bug != Bug::kSkipRecordRecovery) {
      st = a.record->Recover();
      if (!st.ok() && !fs_.crashed()) {
        Violate(kRestart, absl::StrCat("operation record: ", st.ToString()));
      }
    }
    a.record->PruneEvery(&clock_, agent::kRecordPruneInterval);
    agent::RequestQueueOptions qo;
    qo.gate = a.manager.get();
    a.queue =
        std::make_unique<agent::RequestQueue>(qo, &wall_, &clock_, a.record.get(), &executor_);
    agent::RequestQueue* queue = a.queue.get();
    a.retention = std::make_unique<agent::RetentionDecisions>(
        &wall_, a.manager.get(), [queue](int64_t g) { return queue->CallsOn(g); }, &collector_,
        [this](const std::vector<agent::RetentionStatus>& s) {
          (void)agent::WriteRetentionRecord(kRetentionPath, s, wall_.Now(), &fs_);
        });
    agent::ConnectionParams p;
    p.node_id = kNodeId;
    p.installation_id = kInstallationId;
    p.provider = "docker";
    p.deployment_generation = 1;
    p.specification_digest = Digest(1);
    p.limits = agent::ProviderLimits{16, 64};
    p.generation_management = true;
    p.generations = a.manager.get();
    if (options_.bug == Bug::kRetentionNotToldOfDisconnect) {
      a.forgetful = std::make_unique<ForgetfulRetention>(a.retention.get());
      p.retention = a.forgetful.get();
    } else {
      p.retention = a.retention.get();
    }
    p.events.live = [this](int64_t epoch) { OnLive(epoch); };
    a.conn = std::make_unique<Connection>(
        p, &transport_, &wall_, &clock_, &a.health, a.epochs.get(),
        agent::Backoff([this] { return rng_.Uniform(); }), a.queue.get(), [](absl::Status) {});
    a.manager->OnGenerationReports(Reports());
    if (!fs_.crashed()) a.conn->Start();
  }

  // The process ends (kill -9, or a power loss after a crash at a durable
  // step); it starts again a little later from what is on "disk".
  void StopAgent(bool power_loss) {
    if (current_ != 0) {
      Wire& w = wires_.at(current_);
      w.core_open = false;
      w.agent_open = false;
      current_ = 0;
    }
    transport_.Detach();
    agent_.reset();
    if (power_loss) {
      FaultFs::CrashOptions co;
      co.persisted_metadata_ops = rng_.Below(fs_.PendingDirOps() + 1);
      co.data = static_cast<FaultFs::UnsyncedData>(rng_.Below(3));
      fs_.Crash(co);
    } else {
      fs_.KillProcess();
    }
    crash_armed_ = false;
    Post(rng_.Millis(100, 5000), [this] {
      if (agent_ == nullptr) StartAgent();
    });
  }

  void OnLive(int64_t epoch) {
    ++counters_["connections_live"];
    Event(absl::StrCat("agent live, epoch ", epoch));
    if (epoch < max_live_epoch_) {
      Violate(kEpochs, absl::StrCat("the agent went live with owner epoch ", epoch,
                                    " after having been live with ", max_live_epoch_));
    }
    max_live_epoch_ = std::max(max_live_epoch_, epoch);
  }

  std::vector<agent::GenerationReport> Reports() const {
    std::vector<agent::GenerationReport> out;
    for (const auto& [g, s] : held_) out.push_back({g, Digest(g), s, std::nullopt});
    return out;
  }

  // privhelper's periodic probe of what it holds.
  void Probe() {
    if (agent_ != nullptr && !AgentDead()) agent_->manager->OnGenerationReports(Reports());
    Post(absl::Seconds(30), [this] { Probe(); });
  }

  // The operation records written for the mutations this step touched hold no
  // argument and no output (every argument and output the simulation makes
  // carries "SECRET").
  void CheckRecords() {
    for (const std::string& id : dirty_) {
      absl::StatusOr<std::string> text =
          fs_.Contents(absl::StrCat(kOperationsDir, "/", id, ".json"));
      if (text.ok() && text->find("SECRET") != std::string::npos) {
        Violate(kNoPayload, absl::StrCat("the record of ", id, " holds ", *text));
      }
    }
    dirty_.clear();
  }

  // ---- plumbing ----
  void Post(absl::Duration delay, std::function<void()> fn) {
    const uint64_t key = ++next_timer_;
    timers_[key] = clock_.After(delay, [this, key, fn = std::move(fn)] {
      timers_.erase(key);
      fn();
    });
  }

  // Hashes a frame. A retention_ack echoes the exchange id the agent drew from the system's
  // random source (not the seed's), so its id is left out.
  void Hash(const std::string& text) {
    if (text.find("retention_ack") == std::string::npos) {
      HashInto(&hash_, text);
      return;
    }
    std::string copy = text;
    const size_t at = copy.find("\"id\":\"");
    if (at != std::string::npos) copy.erase(at, 6 + 36);
    HashInto(&hash_, copy);
  }

  void Event(std::string_view what) {
    HashInto(&hash_, what);
    if (options_.trace) {
      std::fprintf(stderr, "step %" PRIu64 " t=%s %.*s\n", step_,
                   absl::FormatDuration(clock_.Monotonic()).c_str(), static_cast<int>(what.size()),
                   what.data());
    }
  }

  void Violate(const char* name, std::string detail) {
    if (!violation_.empty()) return;
    violation_ = name;
    violation_detail_ = std::move(detail);
    Event(absl::StrCat("VIOLATION ", violation_, ": ", violation_detail_));
  }

  Options options_;
  Rng rng_;
  Rates rates_;
  // The full-disk fault draws from a stream of its own, so adding it left every earlier
  // seed's run unchanged up to its first full disk.
  Rng disk_rng_;
  double disk_full_rate_ = 0;  // per step
  bool disk_full_ = false;
  SimulatedClock clock_;
  WallClock wall_;
  FaultFs fs_{SimFsOptions()};
  SimTransport transport_;
  SimExecutor executor_;
  SimCollector collector_;
  std::map<uint64_t, std::unique_ptr<Timer>> timers_;
  uint64_t next_timer_ = 0;
  uint64_t step_ = 0;
  uint64_t hash_ = 14695981039346656037ull;
  std::map<std::string, uint64_t> counters_;
  RunResult result_;
  std::string violation_;
  std::string violation_detail_;

  // The agent.
  std::unique_ptr<Agent> agent_;
  uint64_t incarnation_ = 0;
  bool crash_armed_ = false;
  int64_t max_live_epoch_ = 0;

  // Core.
  int64_t core_epoch_ = 5;
  MonoTime core_down_until_ = absl::ZeroDuration();
  bool stale_armed_ = false;
  int64_t target_ = 1;
  std::map<uint64_t, Wire> wires_;
  uint64_t next_serial_ = 0;
  uint64_t current_ = 0;  // the agent's transport connection (0: none)
  std::map<std::string, Mutation> mutations_;
  std::vector<std::string> mutation_ids_;
  std::vector<std::string> sandboxes_;
  std::set<std::pair<std::string, int64_t>> grants_;  // (connection_id, generation)
  std::set<int64_t> ever_granted_;
  std::optional<wire::RetentionAck> last_ack_;
  uint64_t secret_ = 0;

  // privhelper.
  std::map<int64_t, HeldState> held_;
  std::map<int64_t, int> inflight_;
  std::map<std::string, NativeRun> native_;
  MonoTime priv_down_until_ = absl::ZeroDuration();
  uint64_t native_serial_ = 0;
  std::set<std::string> dirty_;
};

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

}  // namespace

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

// The simulated world of tests/sim/world.h, shared by its files (test-only, not an API):
// world.cc (set-up, the step loop, plumbing), world_wire.cc (the WebSockets), world_core.cc
// (the step's faults and Core), world_privhelper.cc (privhelper and the provider),
// world_agent.cc (the agent's processes and its durable state).
#ifndef SANDBOX_NODE_TESTS_SIM_WORLD_INTERNAL_H_
#define SANDBOX_NODE_TESTS_SIM_WORLD_INTERNAL_H_

#include "tests/sim/world.h"

#include <cinttypes>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
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

namespace sn::sim::internal {

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
constexpr char kAnswered[] = "observe_agrees_with_answer";
constexpr char kAbsent[] = "absent_needs_inventory";
constexpr char kEpochs[] = "epochs_never_decrease";
constexpr char kOneRetention[] = "one_retention_pending";
constexpr char kGrant[] = "collect_needs_current_grant";
constexpr char kReference[] = "collect_needs_no_reference";
constexpr char kNoPayload[] = "record_holds_no_payload";
constexpr char kRestart[] = "restarts_from_disk";

inline std::string Digest(int64_t g) {
  std::string d(64, '0');
  std::string n = std::to_string(g);
  d.replace(64 - n.size(), n.size(), n);
  return d;
}

// FNV-1a.
inline void HashInto(uint64_t* h, std::string_view s) {
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
  uint64_t send_no = 0;  // a mutation: which send of its id (Mutation::sends)
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
  MonoTime first_sent;    // Core retries it only within the spec's 24 h (world_core.cc)
  std::optional<MonoTime> accepted_at;
  std::optional<wire::RecordedResponse> final;  // a definite outcome Core learned
  // Sends of this id so far, and when Core received a final answer (anything but `uncertain`)
  // to the latest of them, with its code: an observe sent after that must say the same.
  uint64_t sends = 0;
  std::optional<MonoTime> answered_at;
  std::string answered_code;
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

inline FaultFs::Options SimFsOptions() {
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

  RunResult RunAll();

  // ---- transport ----
  void Dial();
  void AgentSend(std::string text);
  void AgentClose(int code);

  // ---- privhelper ----
  void Execute(const wire::Request& request, absl::Duration remaining,
               std::function<void(ExecOutcome)> done);
  std::unique_ptr<agent::CollectCall> Collect(const GenerationRef& ref,
                                              std::function<void(agent::CollectResult)> done);

 private:
  // ---- the step ----
  void Step();

  // The state disk fills up (another program's files): every write that needs a byte fails
  // with ENOSPC until it has room again, 1 s to 5 min later.
  void FillDisk(absl::string_view why);
  void CoreActs();

  // The wire Core uses: welcomed, open, not poisoned, not a stale instance's.
  Wire* Usable();
  std::string PickMutation();
  void NewRequest(Wire& w);
  void Observe(Wire& w);
  void SendRequest(Wire& w, wire::Request r);
  void Retarget();
  wire::Deployment DeploymentFacts() const;
  void Hostile(Wire& w);

  // ---- Core's side of a wire ----
  void CoreReceive(Wire& w, const std::string& text);
  void CoreRetention(Wire& w, const wire::Retention& r);
  void CoreResponse(Wire& w, const wire::Response& resp);

  // Core learned a definite outcome of `m` (a success or a conflict): it must
  // agree with what it learned before and, for a success, with what
  // privhelper's native execution returned.
  void Definite(Mutation& m, const wire::RecordedResponse& r, const std::string& how);

  // `sent`: when Core sent the observe. An `unknown` is wrong only about a mutation accepted
  // before that: one Core sends (again) after its observe may be accepted after the agent
  // answered the observe, in the connection's order (a mutation refused unrecorded, e.g. on a
  // full state disk, and then retried, is unknown until the retry).
  void CheckObserve(const std::string& id, MonoTime sent, const wire::ObserveResult& o);

  ExecOutcome NativeOutcome(const wire::Request& r);

  // ---- the wire's mechanics ----
  MonoTime Latency(MonoTime* next);
  void ToAgent(Wire& w, std::string text, bool is_text = true);
  void AgentClosed(uint64_t serial, agent::CloseInfo info, absl::Duration delay);

  // The TCP connection breaks: no close frame either way.
  void Cut(Wire& w);
  void CoreClose(Wire& w, int code);

  // ---- the agent's processes ----
  bool AgentDead() const { return agent_ == nullptr || fs_.crashed(); }

  std::optional<std::string> LiveConnectionId() const;
  void StartAgent();

  // The process ends (kill -9, or a power loss after a crash at a durable
  // step); it starts again a little later from what is on "disk".
  void StopAgent(bool power_loss);
  void OnLive(int64_t epoch);
  std::vector<agent::GenerationReport> Reports() const;

  // privhelper's periodic probe of what it holds.
  void Probe();

  // The operation records written for the mutations this step touched hold no
  // argument and no output (every argument and output the simulation makes
  // carries "SECRET").
  void CheckRecords();

  // ---- plumbing ----
  void Post(absl::Duration delay, std::function<void()> fn);

  // Hashes a frame. A retention_ack echoes the exchange id the agent drew from the system's
  // random source (not the seed's), so its id is left out.
  void Hash(const std::string& text);
  void Event(std::string_view what);
  void Violate(const char* name, std::string detail);
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
  // How far the operation record's journal was searched (CheckRecords).
  uint64_t checked_segment_ = 0;
  size_t checked_bytes_ = 0;
};

}  // namespace sn::sim::internal

#endif  // SANDBOX_NODE_TESTS_SIM_WORLD_INTERNAL_H_

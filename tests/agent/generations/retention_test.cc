// The retention exchange end to end inside the agent, on SimulatedClock: the real Connection
// (strict exchange), the real GenerationManager (candidates, references), the real
// RequestQueue (calls per generation) and RetentionDecisions, against a fake Core that writes
// the frames and a fake privhelper collector that records every CollectGeneration. "Deletes
// nothing" is observable as "no CollectGeneration call".
#include "agent/generations/retention.h"

#include <stdlib.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/connection/connection.h"
#include "agent/generations/manager.h"
#include "agent/generations/pins.h"
#include "agent/requests/operation_record.h"
#include "agent/requests/request_queue.h"
#include "common/wire/codec.h"
#include "common/wire/limits.h"
#include "gtest/gtest.h"
#include "tests/agent/fakes/connection_fixture.h"
#include "tests/agent/fakes/connection_seams.h"
#include "tests/agent/fakes/fake_preparer.h"
#include "tests/agent/fakes/test_support.h"

namespace sn::agent::testing {
namespace {

constexpr int64_t kEpoch = 5;

std::string Digest(int64_t g) {
  std::string d(64, '0');
  std::string n = std::to_string(g);
  d.replace(64 - n.size(), n.size(), n);
  return d;
}

GenerationReport Report(int64_t g, HeldState s = HeldState::kReady) {
  return GenerationReport{g, Digest(g), s,
                          s == HeldState::kFailed ? std::optional(Diagnostic::kOwnershipRefused)
                                                  : std::nullopt};
}

// privhelper's CollectGeneration in miniature: records every call; answers at the next
// simulated instant (auto) or when the test says so.
class FakeCollector final : public GenerationCollector {
 public:
  struct Call {
    GenerationRef ref;
    std::function<void(CollectResult)> done;
    bool cancelled = false;
    bool answered = false;
  };
  explicit FakeCollector(SimulatedClock* clock) : clock_(clock) {}

  std::unique_ptr<CollectCall> Collect(const GenerationRef& ref,
                                       std::function<void(CollectResult)> done) override {
    auto c = std::make_shared<Call>();
    c->ref = ref;
    c->done = std::move(done);
    calls.push_back(c);
    if (automatic) {
      timers_.push_back(clock_->After(absl::ZeroDuration(), [this, c] { Answer(*c, next); }));
    }
    return std::make_unique<Handle>(c);
  }
  void Answer(Call& c, CollectOutcome o) {
    if (c.answered) return;
    c.answered = true;
    CollectResult r;
    r.outcome = o;
    if (o == CollectOutcome::kDropped) r.state = HeldState::kDropped;
    if (o == CollectOutcome::kHeld) r.reason = "native helper pid 42 not yet reaped";
    c.done(r);
  }
  std::set<int64_t> Collected() const {
    std::set<int64_t> s;
    for (const auto& c : calls) s.insert(c->ref.generation);
    return s;
  }

  bool automatic = true;
  CollectOutcome next = CollectOutcome::kDropped;
  std::vector<std::shared_ptr<Call>> calls;

 private:
  class Handle final : public CollectCall {
   public:
    explicit Handle(std::shared_ptr<Call> c) : c_(std::move(c)) {}
    void Cancel() override { c_->cancelled = true; }

   private:
    std::shared_ptr<Call> c_;
  };
  SimulatedClock* clock_;
  std::vector<std::unique_ptr<Timer>> timers_;
};

// Holds every started call until the test answers it.
class HoldingExecutor final : public OperationExecutor {
 public:
  void Execute(const wire::Request& request, absl::Duration,
               std::function<void(ExecOutcome)> done) override {
    started.push_back({request, std::move(done)});
  }
  std::vector<std::pair<wire::Request, std::function<void(ExecOutcome)>>> started;
};

class RetentionTest : public ::testing::Test {
 protected:
  RetentionTest() : collector_(&clock_) {
    char tmpl[] = "/tmp/agent-ret-XXXXXX";
    dir_ = mkdtemp(tmpl);
    health_.report = ReadyReport();
    GenerationManagerOptions o;
    o.generation_management = true;
    o.enrolled = {1, Digest(1)};
    manager_ = std::make_unique<GenerationManager>(
        o, &clock_, &clock_, &pins_, &preparer_,
        [](const GenerationRef&) -> std::optional<std::set<std::string>> {
          return std::set<std::string>{"busybox"};
        });
    EXPECT_TRUE(manager_->Start().ok());
    record_ = std::make_unique<OperationRecord>(dir_ + "/operations", &clock_);
    EXPECT_TRUE(record_->Recover().ok());
    RequestQueueOptions qo;
    qo.gate = manager_.get();
    queue_ = std::make_unique<RequestQueue>(qo, &clock_, &clock_, record_.get(), &executor_);
    retention_ = std::make_unique<RetentionDecisions>(
        &clock_, manager_.get(), [this](int64_t g) { return queue_->CallsOn(g); }, &collector_,
        [this](const std::vector<RetentionStatus>& s) { recorded_ = s; });
    ConnectionParams p;
    p.node_id = kNodeId;
    p.installation_id = kInstallationId;
    p.provider = "docker";
    p.deployment_generation = 1;
    p.specification_digest = Digest(1);
    p.limits = ProviderLimits{16, 64};
    p.generation_management = true;
    p.generations = manager_.get();
    p.retention = retention_.get();
    conn_ = std::make_unique<Connection>(p, &transport_, &clock_, &clock_, &health_, &epochs_,
                                         Backoff([] { return 0.5; }), queue_.get(),
                                         [](absl::Status) {});
  }
  ~RetentionTest() override {
    conn_.reset();
    if (system(("rm -rf " + dir_).c_str()) != 0) {
    }
  }

  // privhelper holds generation 1 (the target) and `others`.
  void Hold(std::vector<GenerationReport> others) {
    std::vector<GenerationReport> all = {Report(1)};
    for (GenerationReport& r : others) all.push_back(std::move(r));
    manager_->OnGenerationReports(all);
  }

  std::string DeploymentWelcome(const char* connection_id = kConnectionId,
                                std::optional<int64_t> serving = std::nullopt) {
    wire::Welcome w;
    w.connection_id = connection_id;
    w.owner_epoch = kEpoch;
    w.deployment = wire::Deployment{target_, Digest(target_), serving};
    return wire::Encode(wire::Frame(w));
  }

  void GoLive(const char* connection_id = kConnectionId) {
    if (conn_->state() == Connection::State::kIdle) {
      conn_->Start();
    }
    ASSERT_TRUE(transport_.dialing);
    transport_.Upgrade();
    ASSERT_EQ(conn_->state(), Connection::State::kAwaitingWelcome);
    transport_.Receive(DeploymentWelcome(connection_id));
    ASSERT_EQ(conn_->state(), Connection::State::kLive);
  }

  // Core's deployment facts changed (a heartbeat_ack).
  void Deploy(int64_t target, std::optional<int64_t> serving) {
    target_ = target;
    wire::HeartbeatAck a;
    a.connection_id = kConnectionId;
    a.owner_epoch = kEpoch;
    a.deployment = wire::Deployment{target, Digest(target), serving};
    transport_.Receive(wire::Encode(wire::Frame(a)));
  }

  std::vector<wire::Retention> Retentions() {
    std::vector<wire::Retention> out;
    for (const std::string& text : transport_.sent) {
      absl::StatusOr<wire::Frame> f = wire::Decode(text, wire::Role::kCore);
      EXPECT_TRUE(f.ok()) << f.status();
      if (f.ok() && wire::TypeOf(*f) == wire::FrameType::kRetention) {
        out.push_back(std::get<wire::Retention>(*f));
      }
    }
    return out;
  }
  wire::Retention LastRetention() {
    std::vector<wire::Retention> all = Retentions();
    EXPECT_FALSE(all.empty());
    return all.empty() ? wire::Retention{} : all.back();
  }

  // Core's exact answer to `r`: keep false for the generations in `drop`.
  static wire::RetentionAck AckOf(const wire::Retention& r, const std::set<int64_t>& drop) {
    wire::RetentionAck a;
    a.id = r.id;
    a.sequence = r.sequence;
    a.connection_id = r.connection_id;
    a.owner_epoch = r.owner_epoch;
    for (const wire::RetentionEntry& e : r.entries) {
      a.entries.push_back({e.generation, e.specification_digest, !drop.count(e.generation)});
    }
    return a;
  }
  static wire::RetentionAck DropAll(const wire::Retention& r) {
    std::set<int64_t> all;
    for (const wire::RetentionEntry& e : r.entries) all.insert(e.generation);
    return AckOf(r, all);
  }
  void Send(const wire::RetentionAck& a) { transport_.Receive(wire::Encode(wire::Frame(a))); }

  static std::vector<int64_t> Generations(const wire::Retention& r) {
    std::vector<int64_t> g;
    for (const wire::RetentionEntry& e : r.entries) g.push_back(e.generation);
    return g;
  }

  // Core sends a request naming `generation`.
  void RequestOn(int64_t generation, int n) {
    wire::Request r;
    char id[40];
    std::snprintf(id, sizeof(id), "%08x-0000-4000-8000-%012x", n, n);
    r.id = id;
    r.connection_id = kConnectionId;
    r.owner_epoch = kEpoch;
    r.sequence = ++request_sequence_;
    r.generation = generation;
    r.operation = wire::Operation::kInspect;
    r.operation_name = "inspect";
    r.timeout_ms = 60000;
    r.args = wire::SandboxArgs{"55555555-5555-4555-8555-555555555555"};
    transport_.Receive(wire::Encode(wire::Frame(r)));
  }

  void ExpectClosedWith(int code) {
    ASSERT_FALSE(transport_.close_codes.empty());
    EXPECT_EQ(transport_.close_codes.back(), code);
    EXPECT_EQ(conn_->state(), Connection::State::kClosing);
  }

  std::set<int64_t> Observed() {
    std::set<int64_t> s;
    for (const GenerationStatus& st : manager_->Snapshot()) s.insert(st.ref.generation);
    return s;
  }

  std::string dir_;
  SimulatedClock clock_;
  FakeTransport transport_;
  FakeHealth health_;
  FakeEpochStore epochs_;
  MemoryPins pins_;
  FakePreparer preparer_;
  HoldingExecutor executor_;
  FakeCollector collector_;
  std::unique_ptr<GenerationManager> manager_;
  std::unique_ptr<OperationRecord> record_;
  std::unique_ptr<RequestQueue> queue_;
  std::unique_ptr<RetentionDecisions> retention_;
  std::unique_ptr<Connection> conn_;
  std::vector<RetentionStatus> recorded_;
  int64_t target_ = 1;
  int64_t request_sequence_ = 0;
};

TEST_F(RetentionTest, FirstExchangeFollowsWelcomeWithSequenceOneAndAsksOnlyUnreferencedRecords) {
  Hold({Report(2), Report(3, HeldState::kFailed), Report(4, HeldState::kPreparing),
        Report(5, HeldState::kCollecting), Report(6, HeldState::kDropped)});
  GoLive();
  wire::Retention r = LastRetention();
  EXPECT_EQ(r.sequence, 1);
  EXPECT_EQ(r.connection_id, kConnectionId);
  EXPECT_EQ(r.owner_epoch, kEpoch);
  EXPECT_EQ(r.id.size(), 36u);
  // Not the target (1), never a dropped record (6); an unfinished journal (5) is a candidate.
  EXPECT_EQ(Generations(r), (std::vector<int64_t>{2, 3, 4, 5}));
  for (const wire::RetentionEntry& e : r.entries) {
    EXPECT_EQ(e.specification_digest, Digest(e.generation));
    EXPECT_FALSE(e.keep.has_value());
  }
  // Neither the journal nor the dropped record is ever observed.
  EXPECT_EQ(Observed(), (std::set<int64_t>{1, 2, 3, 4}));
}

TEST_F(RetentionTest, MatchedAckCollectsExactlyTheGrantedPairsAndDroppedOnesAreNeverReported) {
  Hold({Report(2), Report(3)});
  GoLive();
  Send(AckOf(LastRetention(), {2}));
  clock_.Advance(absl::ZeroDuration());
  ASSERT_EQ(collector_.calls.size(), 1u);
  EXPECT_EQ(collector_.calls[0]->ref, (GenerationRef{2, Digest(2)}));
  EXPECT_EQ(conn_->state(), Connection::State::kLive);
  EXPECT_EQ(Observed(), (std::set<int64_t>{1, 3}));
  // Never asked about again; 3 (kept) is asked again once its cycle (60 s) has passed.
  for (int i = 0; i < 7; ++i) {
    clock_.Advance(absl::Seconds(10));
    Deploy(1, std::nullopt);
  }
  EXPECT_EQ(conn_->state(), Connection::State::kLive);
  std::vector<wire::Retention> all = Retentions();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].sequence, 2);
  EXPECT_EQ(Generations(all[1]), (std::vector<int64_t>{3}));
}

TEST_F(RetentionTest, ProbeAnsweredBeforeTheCollectionDoesNotBringADroppedGenerationBack) {
  Hold({Report(2)});
  GoLive();
  Send(DropAll(LastRetention()));
  clock_.Advance(absl::ZeroDuration());
  ASSERT_EQ(collector_.calls.size(), 1u);
  Hold({Report(2)});  // a probe taken before the collection, answered after it
  EXPECT_EQ(Observed(), (std::set<int64_t>{1}));
  for (int i = 0; i < 7; ++i) {
    clock_.Advance(absl::Seconds(10));
    Deploy(1, std::nullopt);
  }
  EXPECT_EQ(conn_->state(), Connection::State::kLive);
  EXPECT_EQ(Retentions().size(), 1u);  // never asked about again
}

TEST_F(RetentionTest, UnfinishedJournalAfterARestartResumesOnlyThroughAFreshGrant) {
  collector_.automatic = false;
  Hold({Report(2, HeldState::kCollecting)});  // privhelper found the journal at its start
  GoLive();
  EXPECT_TRUE(collector_.calls.empty());       // nothing resumes on its own
  EXPECT_EQ(Observed(), (std::set<int64_t>{1}));  // never advertised
  RequestOn(2, 1);                             // never usable
  EXPECT_TRUE(executor_.started.empty());
  Send(DropAll(LastRetention()));
  ASSERT_EQ(collector_.calls.size(), 1u);
  EXPECT_EQ(collector_.calls[0]->ref, (GenerationRef{2, Digest(2)}));
}

TEST_F(RetentionTest, RequestsOnAGenerationBeingCollectedAnswerUnconfirmed) {
  collector_.automatic = false;
  Hold({Report(2)});
  GoLive();
  Send(DropAll(LastRetention()));
  ASSERT_EQ(collector_.calls.size(), 1u);
  const size_t before = transport_.sent.size();
  RequestOn(2, 1);
  EXPECT_TRUE(executor_.started.empty());
  ASSERT_EQ(transport_.sent.size(), before + 1);
  absl::StatusOr<wire::Frame> f = wire::Decode(transport_.sent.back(), wire::Role::kCore);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(std::get<wire::Response>(*f).error_code, std::optional<std::string>("unconfirmed"));
  // HELD: the generation is usable again.
  collector_.Answer(*collector_.calls[0], CollectOutcome::kHeld);
  RequestOn(2, 2);
  EXPECT_EQ(executor_.started.size(), 1u);
}

TEST_F(RetentionTest, RetentionNeverWaitsBehindAFullRequestQueue) {
  std::vector<GenerationReport> nine;
  for (int64_t g = 2; g <= 10; ++g) nine.push_back(Report(g));
  Hold(nine);
  GoLive();
  Send(AckOf(LastRetention(), {}));  // the first 8 kept
  for (int i = 1; i <= static_cast<int>(wire::kMaxPendingRequests); ++i) RequestOn(1, i);
  EXPECT_EQ(queue_->pending(), wire::kMaxPendingRequests);  // 32 pending, none answered
  clock_.Advance(absl::Seconds(10));                         // the next heartbeat tick
  ASSERT_EQ(conn_->state(), Connection::State::kLive);
  const wire::Retention second = LastRetention();
  EXPECT_EQ(second.sequence, 2);
  EXPECT_EQ(Generations(second), (std::vector<int64_t>{10}));
  Send(DropAll(second));  // read and acted on at once
  clock_.Advance(absl::ZeroDuration());
  EXPECT_EQ(collector_.Collected(), (std::set<int64_t>{10}));
  EXPECT_EQ(queue_->pending(), wire::kMaxPendingRequests);
}

// Every kind of bad ack deletes nothing (no CollectGeneration) and closes with 4006.
struct BadAck {
  const char* name;
  void (*spoil)(wire::RetentionAck&);
};

const BadAck kBadAcks[] = {
    {"OtherId", [](wire::RetentionAck& a) { a.id = kOtherConnectionId; }},
    {"StaleSequence", [](wire::RetentionAck& a) { a.sequence = 2; }},
    {"OtherConnection", [](wire::RetentionAck& a) { a.connection_id = kOtherConnectionId; }},
    {"OtherEpoch", [](wire::RetentionAck& a) { a.owner_epoch = kEpoch + 1; }},
    {"Partial", [](wire::RetentionAck& a) { a.entries.pop_back(); }},
    {"Reordered", [](wire::RetentionAck& a) { std::swap(a.entries[0], a.entries[1]); }},
    {"MixedDigest", [](wire::RetentionAck& a) { a.entries[1].specification_digest = Digest(9); }},
    {"MixedGeneration", [](wire::RetentionAck& a) { a.entries[0].generation = 9; }},
    {"ExtraEntry", [](wire::RetentionAck& a) { a.entries.push_back({9, Digest(9), false}); }},
};

class BadAckTest : public RetentionTest, public ::testing::WithParamInterface<size_t> {};

TEST_P(BadAckTest, DeletesNothingAndCloses4006) {
  const BadAck& kind = kBadAcks[GetParam()];
  Hold({Report(2), Report(3), Report(4)});
  GoLive();
  wire::RetentionAck a = DropAll(LastRetention());
  kind.spoil(a);
  Send(a);
  clock_.Advance(absl::Seconds(1));
  ExpectClosedWith(wire::kCloseCorrelation);
  EXPECT_TRUE(collector_.calls.empty());
  EXPECT_EQ(retention_->pending_grants(), 0u);
  EXPECT_EQ(Observed(), (std::set<int64_t>{1, 2, 3, 4}));
}

INSTANTIATE_TEST_SUITE_P(EveryKind, BadAckTest,
                         ::testing::Range<size_t>(0, sizeof(kBadAcks) / sizeof(kBadAcks[0])),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return std::string(kBadAcks[info.param].name);
                         });

TEST_F(RetentionTest, UnsolicitedAckDeletesNothingAndCloses4006) {
  Hold({});  // nothing to ask about: no exchange pending
  GoLive();
  EXPECT_TRUE(Retentions().empty());
  wire::RetentionAck a;
  a.id = kOtherConnectionId;
  a.sequence = 1;
  a.connection_id = kConnectionId;
  a.owner_epoch = kEpoch;
  a.entries = {{1, Digest(1), false}};
  Send(a);
  ExpectClosedWith(wire::kCloseCorrelation);
  EXPECT_TRUE(collector_.calls.empty());
}

TEST_F(RetentionTest, ReplayedAckDeletesNothingMoreAndCloses4006) {
  Hold({Report(2), Report(3)});
  GoLive();
  const wire::RetentionAck a = AckOf(LastRetention(), {});
  Send(a);
  EXPECT_EQ(conn_->state(), Connection::State::kLive);
  wire::RetentionAck replay = a;
  replay.entries[0].keep = false;  // even a replay that now grants a drop
  Send(replay);
  clock_.Advance(absl::Seconds(1));
  ExpectClosedWith(wire::kCloseCorrelation);
  EXPECT_TRUE(collector_.calls.empty());
}

TEST_F(RetentionTest, NoAckClosesWith4008AtExactlyThirtySeconds) {
  Hold({Report(2)});
  GoLive();
  ASSERT_EQ(Retentions().size(), 1u);
  // Keep the connection otherwise healthy: Core answers the heartbeats.
  clock_.Advance(absl::Seconds(10));
  Deploy(1, std::nullopt);
  clock_.Advance(absl::Seconds(10));
  Deploy(1, std::nullopt);
  clock_.Advance(absl::Seconds(10) - absl::Milliseconds(1));
  EXPECT_EQ(conn_->state(), Connection::State::kLive);
  EXPECT_EQ(Retentions().size(), 1u);  // one exchange pending: no second one
  clock_.Advance(absl::Milliseconds(1));
  ExpectClosedWith(wire::kCloseRetentionTimeout);
  EXPECT_TRUE(collector_.calls.empty());
}

TEST_F(RetentionTest, DisconnectWithExchangePendingDeletesNothingAndItsLateAckIs4006) {
  Hold({Report(2)});
  GoLive();
  const wire::Retention first = LastRetention();
  transport_.PeerClose(1001);
  EXPECT_EQ(conn_->state(), Connection::State::kBackoff);
  clock_.Advance(absl::Seconds(5));
  GoLive(kOtherConnectionId);
  // The new connection starts its own exchange at sequence 1.
  const wire::Retention second = LastRetention();
  EXPECT_EQ(second.sequence, 1);
  EXPECT_EQ(second.connection_id, kOtherConnectionId);
  EXPECT_NE(second.id, first.id);
  Send(DropAll(first));  // the old connection's answer arrives late
  clock_.Advance(absl::Seconds(1));
  ExpectClosedWith(wire::kCloseCorrelation);
  EXPECT_TRUE(collector_.calls.empty());
}

TEST_F(RetentionTest, SequenceIncreasesByExactlyOneAtMostOneExchangePerHeartbeat) {
  std::vector<GenerationReport> many;
  for (int64_t g = 2; g <= 20; ++g) many.push_back(Report(g));
  Hold(many);
  GoLive();
  for (int i = 0; i < 3; ++i) {
    wire::Retention r = LastRetention();
    EXPECT_EQ(r.sequence, i + 1);
    EXPECT_LE(r.entries.size(), wire::kMaxRetentionEntries);
    Send(AckOf(r, {}));
    EXPECT_EQ(Retentions().size(), static_cast<size_t>(i + 1));  // not before the next tick
    clock_.Advance(absl::Seconds(10));
    Deploy(1, std::nullopt);
  }
  std::set<int64_t> asked;
  for (const wire::Retention& r : Retentions()) {
    for (int64_t g : Generations(r)) EXPECT_TRUE(asked.insert(g).second) << g;
  }
  EXPECT_EQ(asked.size(), 19u);  // every candidate once in ceil(19/8) = 3 exchanges
  EXPECT_TRUE(collector_.calls.empty());
}

TEST_F(RetentionTest, GrantWhileARequestOnTheGenerationIsQueuedOrRunningCollectsNothing) {
  Hold({Report(2)});
  GoLive();
  const wire::Retention r = LastRetention();
  RequestOn(2, 1);  // running at the executor (privhelper has not answered)
  ASSERT_EQ(executor_.started.size(), 1u);
  EXPECT_EQ(queue_->CallsOn(2), 1u);
  Send(DropAll(r));
  clock_.Advance(absl::ZeroDuration());
  EXPECT_TRUE(collector_.calls.empty());
  ASSERT_EQ(recorded_.size(), 1u);
  EXPECT_EQ(recorded_[0].collection, "held locally");
  // privhelper answers; a new grant (asked again after 30 s) may now be used.
  ExecOutcome o;
  o.result = wire::Result(wire::InspectResult{"55555555-5555-4555-8555-555555555555",
                                              wire::SandboxState::kAbsent, std::nullopt});
  executor_.started[0].second(o);
  EXPECT_EQ(queue_->CallsOn(2), 0u);
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(10));
    Deploy(1, std::nullopt);
  }
  const wire::Retention again = LastRetention();
  ASSERT_EQ(again.sequence, 2);
  Send(DropAll(again));
  clock_.Advance(absl::ZeroDuration());
  EXPECT_EQ(collector_.Collected(), (std::set<int64_t>{2}));
}

TEST_F(RetentionTest, GrantForWhatBecameTargetOrServingMeanwhileCollectsNothing) {
  Hold({Report(2), Report(3)});
  GoLive();
  const wire::Retention r = LastRetention();
  ASSERT_EQ(Generations(r), (std::vector<int64_t>{2, 3}));
  Deploy(3, 2);  // Core moves the target to 3 and serves 2 (ready here: the pin moves)
  ASSERT_TRUE(manager_->pins().serving.has_value());
  EXPECT_EQ(manager_->pins().serving->generation, 2);
  Send(DropAll(r));  // a (non-conforming) Core grants both anyway
  clock_.Advance(absl::ZeroDuration());
  EXPECT_TRUE(collector_.calls.empty());
  ASSERT_EQ(recorded_.size(), 2u);
  EXPECT_EQ(recorded_[0].reason, "serving pin");
  EXPECT_EQ(recorded_[1].reason, "target");
}

TEST_F(RetentionTest, GrantWhilePreparingCollectsNothing) {
  Hold({Report(2, HeldState::kPreparing)});
  GoLive();
  const wire::Retention r = LastRetention();
  manager_->RequestPreparation({2, Digest(2)});  // issue 11's repair, scheduled
  Send(DropAll(r));
  clock_.Advance(absl::ZeroDuration());
  EXPECT_TRUE(collector_.calls.empty());
  ASSERT_EQ(recorded_.size(), 1u);
  EXPECT_EQ(recorded_[0].reason, "preparation");
}

TEST_F(RetentionTest, GrantsOfAnEndedConnectionAreIgnoredAndItsCollectionCancelled) {
  collector_.automatic = false;
  Hold({Report(2), Report(3)});
  GoLive();
  Send(DropAll(LastRetention()));
  ASSERT_EQ(collector_.calls.size(), 1u);  // one at a time: 3 waits behind 2
  transport_.PeerClose(1001);
  EXPECT_TRUE(collector_.calls[0]->cancelled);
  collector_.Answer(*collector_.calls[0], CollectOutcome::kHeld);
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(collector_.calls.size(), 1u);  // 3's grant died with its connection
  GoLive(kOtherConnectionId);
  EXPECT_EQ(collector_.calls.size(), 1u);
  EXPECT_EQ(retention_->pending_grants(), 0u);
}

TEST_F(RetentionTest, HeldCollectionNeedsANewGrant) {
  collector_.next = CollectOutcome::kHeld;
  Hold({Report(2)});
  GoLive();
  Send(DropAll(LastRetention()));
  clock_.Advance(absl::ZeroDuration());
  ASSERT_EQ(collector_.calls.size(), 1u);
  EXPECT_EQ(Observed(), (std::set<int64_t>{1, 2}));  // nothing changed
  collector_.next = CollectOutcome::kDropped;
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(10));
    Deploy(1, std::nullopt);
  }
  EXPECT_EQ(collector_.calls.size(), 1u);  // no call without a grant
  Send(DropAll(LastRetention()));
  clock_.Advance(absl::ZeroDuration());
  EXPECT_EQ(collector_.calls.size(), 2u);
  EXPECT_EQ(Observed(), (std::set<int64_t>{1}));
}

TEST_F(RetentionTest, DroppedGenerationNamedAsTargetIsFailedConfigurationInvalidAndNotPrepared) {
  Hold({Report(6, HeldState::kDropped)});
  GoLive();
  Deploy(6, std::nullopt);
  const std::vector<wire::Observation> obs = manager_->NextObservations();
  ASSERT_FALSE(obs.empty());
  EXPECT_EQ(obs[0].generation, 6);
  EXPECT_EQ(obs[0].state, wire::GenerationState::kFailed);
  EXPECT_EQ(obs[0].diagnostic, std::optional<std::string>("configuration_invalid"));
  EXPECT_TRUE(preparer_.attempts.empty());
}

// 100 generations beside the target, all granted: each is asked about once and collected
// within ceil(100/8) = 13 exchanges, the first at welcome and one per heartbeat (10 s)
// after it, so by 120 s after welcome.
TEST_F(RetentionTest, HundredGenerationsAreAllAskedAndCollectedWithinThirteenExchanges) {
  std::vector<GenerationReport> many;
  for (int64_t g = 2; g <= 101; ++g) many.push_back(Report(g));
  Hold(many);
  GoLive();
  size_t answered = 0;
  absl::Duration elapsed = absl::ZeroDuration();
  while (collector_.calls.size() < 100 && elapsed <= absl::Seconds(300)) {
    std::vector<wire::Retention> all = Retentions();
    if (all.size() > answered) {
      Send(DropAll(all.back()));
      answered = all.size();
    }
    clock_.Advance(absl::ZeroDuration());
    if (collector_.calls.size() >= 100) break;
    clock_.Advance(absl::Seconds(10));
    elapsed += absl::Seconds(10);
    Deploy(1, std::nullopt);
  }
  EXPECT_EQ(collector_.Collected().size(), 100u);
  EXPECT_LE(elapsed, absl::Seconds(120));
  EXPECT_EQ(Retentions().size(), 13u);
  EXPECT_EQ(Observed(), (std::set<int64_t>{1}));
  EXPECT_EQ(conn_->state(), Connection::State::kLive);
}

}  // namespace
}  // namespace sn::agent::testing

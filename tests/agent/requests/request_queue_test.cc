// The request path (spec §4-§5) with a simulated clock, a fake executor and a real durable
// record in a temporary directory.
#include "agent/requests/request_queue.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/atomic_file.h"
#include "common/wire/codec.h"
#include "tests/fakes/fault_fs.h"
#include "gtest/gtest.h"

namespace sn::agent::testing {
namespace {

constexpr char kConn[] = "33333333-3333-4333-8333-333333333333";

std::string Uuid(int n) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-0000-4000-8000-%012x", n, n);
  return buf;
}

ExecOutcome Success(wire::Result r) {
  ExecOutcome o;
  o.result = std::move(r);
  return o;
}

struct Started {
  wire::Request request;
  absl::Duration remaining;
  std::function<void(ExecOutcome)> done;
  std::string record_state_at_start;
};

class FakeExecutor final : public OperationExecutor {
 public:
  void Execute(const wire::Request& request, absl::Duration remaining,
               std::function<void(ExecOutcome)> done) override {
    auto s = std::make_unique<Started>();
    s->request = request;
    s->remaining = remaining;
    s->done = std::move(done);
    if (on_execute) on_execute(*s);
    started.push_back(std::move(s));
  }
  std::vector<std::unique_ptr<Started>> started;
  std::function<void(Started&)> on_execute;
};

// The queue asks the gate; its own rules are tested with the generation manager
// (tests/agent/generations/manager_test.cc). This one holds generation 7 with image busybox.
class FixedGate final : public GenerationGate {
 public:
  GateAnswer Admit(const wire::Request& r) override {
    if (r.generation != 7) return GateAnswer::kUnconfirmed;
    if (r.operation == wire::Operation::kCreate &&
        std::get<wire::CreateArgs>(r.args).image != "busybox") {
      return GateAnswer::kInvalid;
    }
    return GateAnswer::kRun;
  }
  std::optional<std::string> DigestOf(int64_t) override { return std::nullopt; }
};

class RequestQueueTest : public ::testing::Test {
 protected:
  // The record is on a FaultFs (tests/fakes) that outlives Reset (a restart of the agent).
  RequestQueueTest() {
    dir_ = "/state";
    EXPECT_TRUE(fs_.MakeDirs("state").ok());
    Reset();
  }

  void Reset(size_t node_wide_limit = 64, size_t max_records = kMaxOperationRecords) {
    queue_.reset();
    record_ = std::make_unique<OperationRecord>(dir_ + "/operations", &clock_, max_records, &fs_);
    EXPECT_TRUE(record_->Recover(absl::Hours(48)).ok());
    RequestQueueOptions o;
    o.gate = &gate_;
    o.node_wide_limit = node_wide_limit;
    o.payload_bytes_limit = payload_limit_;
    o.payload_overhead_bytes = payload_overhead_;
    queue_ = std::make_unique<RequestQueue>(o, &clock_, &clock_, record_.get(), &executor_);
    Live();
  }

  // The record of `id` as the journal holds it now (its last line), "" for none.
  std::string OnDisk(const std::string& id) {
    absl::StatusOr<std::vector<RecordEntry>> all =
        ReadOperationRecord(fs_, dir_ + "/operations", nullptr);
    if (!all.ok()) return "";
    for (const RecordEntry& e : *all) {
      if (e.id == id) return EncodeRecordEntry(e);
    }
    return "";
  }
  // Every byte of the journal.
  std::string AllOnDisk() {
    std::string out;
    absl::StatusOr<std::vector<std::string>> names = fs_.Names(dir_ + "/operations");
    for (const std::string& n : names.ok() ? *names : std::vector<std::string>{}) {
      absl::StatusOr<std::string> t = fs_.Contents(dir_ + "/operations/" + n);
      if (t.ok()) out += *t;
    }
    return out;
  }

  void Live(const char* connection_id = kConn) {
    sequence_ = 0;
    queue_->OnLive({connection_id, 5}, [this](std::string s) { sent_.push_back(std::move(s)); });
  }

  wire::Request Req(int id, wire::Operation op, int sandbox = 1, int64_t timeout_ms = 10000) {
    wire::Request r;
    r.id = Uuid(id);
    r.connection_id = kConn;
    r.owner_epoch = 5;
    r.sequence = ++sequence_;
    r.generation = 7;
    r.operation = op;
    r.operation_name = std::string(wire::OperationName(op));
    r.timeout_ms = timeout_ms;
    switch (op) {
      case wire::Operation::kCreate:
        r.args = wire::CreateArgs{Uuid(1000 + sandbox), "busybox", std::nullopt, std::nullopt,
                                  1000, 64 << 20};
        break;
      case wire::Operation::kExec:
        r.args = wire::ExecArgs{Uuid(1000 + sandbox), {"echo", "hi"}, std::nullopt, 1024};
        break;
      case wire::Operation::kObserve:
        r.args = wire::ObserveArgs{Uuid(sandbox)};
        break;
      default:
        r.args = wire::SandboxArgs{Uuid(1000 + sandbox)};
    }
    return r;
  }

  wire::Response Sent(size_t i) {
    EXPECT_LT(i, sent_.size());
    absl::StatusOr<wire::Frame> f = wire::Decode(sent_.at(i), wire::Role::kCore);
    EXPECT_TRUE(f.ok()) << f.status() << sent_.at(i);
    return std::get<wire::Response>(*f);
  }
  std::optional<std::string> LastError() { return Sent(sent_.size() - 1).error_code; }

  // A write_file of `bytes` bytes of content (its payload) to sandbox `sandbox`.
  wire::Request Write(int id, size_t bytes, int sandbox, int64_t timeout_ms = 10000) {
    wire::Request r = Req(id, wire::Operation::kWriteFile, sandbox, timeout_ms);
    r.args = wire::WriteFileArgs{Uuid(1000 + sandbox), "/data/f", std::string(bytes, 'x'), 0600};
    return r;
  }
  // An exec with `bytes` bytes of stdin.
  wire::Request ExecWithStdin(int id, size_t bytes, int sandbox) {
    wire::Request r = Req(id, wire::Operation::kExec, sandbox);
    std::get<wire::ExecArgs>(r.args).stdin_bytes = std::string(bytes, 'i');
    return r;
  }
  // The ids the executor was asked to run, in order.
  std::vector<std::string> StartedIds() const {
    std::vector<std::string> ids;
    for (const auto& s : executor_.started) ids.push_back(s->request.id);
    return ids;
  }
  // The answer sent for `id` (nullopt: none yet).
  std::optional<wire::Response> ResponseFor(int id) {
    for (size_t i = 0; i < sent_.size(); ++i) {
      wire::Response r = Sent(i);
      if (r.id == Uuid(id)) return r;
    }
    return std::nullopt;
  }
  ExecOutcome Written(int64_t size) { return Success(wire::Result(wire::WriteFileResult{size})); }
  // Sends observe request `observe_id` of operation `operation_id` and expects it to report the
  // operation completed with `error_code`.
  void ExpectObservedCompleted(int observe_id, int operation_id, const std::string& error_code) {
    queue_->OnRequest(Req(observe_id, wire::Operation::kObserve, operation_id));
    absl::StatusOr<wire::Result> res =
        wire::DecodeResult(wire::Operation::kObserve, *ResponseFor(observe_id)->raw_result);
    ASSERT_TRUE(res.ok()) << res.status();
    const auto& obs = std::get<wire::ObserveResult>(*res);
    EXPECT_EQ(obs.state, wire::ObserveState::kCompleted);
    ASSERT_TRUE(obs.response.has_value());
    EXPECT_EQ(obs.response->error_code, error_code);
  }

  std::string dir_;
  SimulatedClock clock_;
  FakeExecutor executor_;
  FixedGate gate_;
  fs::FaultFs fs_;
  std::unique_ptr<OperationRecord> record_;
  std::unique_ptr<RequestQueue> queue_;
  std::vector<std::string> sent_;
  int64_t sequence_ = 0;
  size_t payload_limit_ = 0;  // Reset's payload bound (0: none)
  size_t payload_overhead_ = 0;
};

TEST_F(RequestQueueTest, SequenceMustIncreaseByExactlyOne) {
  EXPECT_EQ(queue_->OnRequest(Req(1, wire::Operation::kInspect)), 0);
  wire::Request skip = Req(2, wire::Operation::kInspect);
  skip.sequence = 3;
  EXPECT_EQ(queue_->OnRequest(skip), wire::kCloseCorrelation);
}

TEST_F(RequestQueueTest, ThirtyThirdPendingRequestClosesWith4007) {
  for (int i = 1; i <= 32; ++i) {
    ASSERT_EQ(queue_->OnRequest(Req(i, wire::Operation::kInspect, i)), 0);
  }
  EXPECT_EQ(queue_->pending(), 32u);
  EXPECT_EQ(queue_->OnRequest(Req(33, wire::Operation::kInspect, 33)), wire::kCloseQueueFull);
}

TEST_F(RequestQueueTest, AnsweredRequestsStopBeingPending) {
  for (int i = 1; i <= 32; ++i) queue_->OnRequest(Req(i, wire::Operation::kInspect, i));
  executor_.started[0]->done(Success(wire::Result(wire::InspectResult{
      Uuid(1001), wire::SandboxState::kAbsent, std::nullopt})));
  EXPECT_EQ(queue_->pending(), 31u);
  EXPECT_EQ(queue_->OnRequest(Req(33, wire::Operation::kInspect, 33)), 0);
}

TEST_F(RequestQueueTest, RequestLayerFailureAnswersInvalidWithoutRunning) {
  wire::Request r = Req(1, wire::Operation::kCreate);
  r.request_error = "create.cpu_millis out of range";
  EXPECT_EQ(queue_->OnRequest(r), 0);
  EXPECT_EQ(LastError(), "invalid");
  EXPECT_TRUE(executor_.started.empty());
}

TEST_F(RequestQueueTest, OtherGenerationAnswersUnconfirmed) {
  wire::Request r = Req(1, wire::Operation::kInspect);
  r.generation = 8;
  queue_->OnRequest(r);
  EXPECT_EQ(LastError(), "unconfirmed");
  EXPECT_TRUE(executor_.started.empty());
}

TEST_F(RequestQueueTest, CreateOfAnImageTheSpecificationLacksIsInvalid) {
  wire::Request r = Req(1, wire::Operation::kCreate);
  std::get<wire::CreateArgs>(r.args).image = "not-in-spec";
  queue_->OnRequest(r);
  EXPECT_EQ(LastError(), "invalid");
  EXPECT_EQ(record_->Find(r.id), nullptr);
}

TEST_F(RequestQueueTest, NodeWideBoundAnswersUnavailable) {
  Reset(/*node_wide_limit=*/2);
  queue_->OnRequest(Req(1, wire::Operation::kInspect, 1));
  queue_->OnRequest(Req(2, wire::Operation::kInspect, 2));
  queue_->OnRequest(Req(3, wire::Operation::kInspect, 3));
  EXPECT_EQ(LastError(), "unavailable");
  EXPECT_EQ(executor_.started.size(), 2u);
}

TEST_F(RequestQueueTest, SameSandboxRunsInSequenceOrderOthersConcurrently) {
  queue_->OnRequest(Req(1, wire::Operation::kKillCompute, 1));
  queue_->OnRequest(Req(2, wire::Operation::kKill, 1));
  queue_->OnRequest(Req(3, wire::Operation::kInspect, 2));
  ASSERT_EQ(executor_.started.size(), 2u);
  EXPECT_EQ(executor_.started[0]->request.id, Uuid(1));
  EXPECT_EQ(executor_.started[1]->request.id, Uuid(3));
  executor_.started[0]->done(ExecOutcome{});
  ASSERT_EQ(executor_.started.size(), 3u);
  EXPECT_EQ(executor_.started[2]->request.id, Uuid(2));
}

TEST_F(RequestQueueTest, BudgetIsConsumedWhileQueued) {
  queue_->OnRequest(Req(1, wire::Operation::kKillCompute, 1, 10000));
  queue_->OnRequest(Req(2, wire::Operation::kKill, 1, 10000));
  clock_.Advance(absl::Seconds(4));
  executor_.started[0]->done(ExecOutcome{});
  ASSERT_EQ(executor_.started.size(), 2u);
  EXPECT_EQ(executor_.started[1]->remaining, absl::Seconds(6));
}

TEST_F(RequestQueueTest, BudgetExpiryBeforeStartAnswersUnavailableAndRecordsIt) {
  queue_->OnRequest(Req(1, wire::Operation::kKillCompute, 1, 60000));
  queue_->OnRequest(Req(2, wire::Operation::kKill, 1, 1000));
  clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(Sent(0).id, Uuid(2));
  EXPECT_EQ(Sent(0).error_code, "unavailable");
  const RecordEntry* e = record_->Find(Uuid(2));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, RecordState::kCompleted);
  EXPECT_EQ(e->response->error_code, "unavailable");
  executor_.started[0]->done(ExecOutcome{});
  EXPECT_EQ(executor_.started.size(), 1u);  // the expired one never runs
}

// The queue answers at the budget's end and leaves the call running: privhelper signals the
// native helper at the same budget's end and answers with the final outcome (executor.h).
TEST_F(RequestQueueTest, BudgetExpiryAfterStartAnswersUncertainAndRecordsTheFinalOutcome) {
  queue_->OnRequest(Req(1, wire::Operation::kCreate, 1, 2000));
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(LastError(), "uncertain");
  EXPECT_EQ(queue_->in_flight(), 1u);  // still waiting for the executor's final outcome
  EXPECT_EQ(record_->Find(Uuid(1))->state, RecordState::kRunning);
  executor_.started[0]->done(Success(wire::Result(wire::CreateResult{Uuid(1001), "n1"})));
  EXPECT_EQ(sent_.size(), 1u);  // answered once
  const RecordEntry* e = record_->Find(Uuid(1));
  ASSERT_EQ(e->state, RecordState::kCompleted);
  EXPECT_FALSE(e->response->error_code.has_value());
  queue_->OnRequest(Req(2, wire::Operation::kObserve, 1));
  wire::Response r = Sent(1);
  ASSERT_TRUE(r.raw_result.has_value());
  absl::StatusOr<wire::Result> res = wire::DecodeResult(wire::Operation::kObserve, *r.raw_result);
  ASSERT_TRUE(res.ok()) << res.status();
  const auto& obs = std::get<wire::ObserveResult>(*res);
  EXPECT_EQ(obs.state, wire::ObserveState::kCompleted);
  EXPECT_EQ(obs.operation, "create");
}

TEST_F(RequestQueueTest, MutationIsDurablyRecordedAsRunningBeforeItsNativeCall) {
  std::string on_disk;
  executor_.on_execute = [&](Started& s) {
    on_disk = OnDisk(s.request.id);
  };
  queue_->OnRequest(Req(1, wire::Operation::kKill, 1));
  EXPECT_NE(on_disk.find("\"state\":\"running\""), std::string::npos) << on_disk;
}

TEST_F(RequestQueueTest, ReadsAreNotRecorded) {
  queue_->OnRequest(Req(1, wire::Operation::kInspect, 1));
  EXPECT_EQ(record_->Find(Uuid(1)), nullptr);
}

TEST_F(RequestQueueTest, HeldIdIsNeverExecutedAgain) {
  queue_->OnRequest(Req(1, wire::Operation::kKill, 1));
  wire::Request again = Req(1, wire::Operation::kKill, 1);
  queue_->OnRequest(again);
  EXPECT_EQ(LastError(), "uncertain");  // still running
  executor_.started[0]->done(ExecOutcome{std::nullopt, "not_found", std::nullopt, std::nullopt});
  queue_->OnRequest(Req(1, wire::Operation::kKill, 1));
  EXPECT_EQ(LastError(), "not_found");  // the recorded outcome
  EXPECT_EQ(executor_.started.size(), 1u);
}

TEST_F(RequestQueueTest, ObserveOfAnUnrecordedIdIsUnknown) {
  queue_->OnRequest(Req(1, wire::Operation::kObserve, 99));
  wire::Response r = Sent(0);
  absl::StatusOr<wire::Result> res = wire::DecodeResult(wire::Operation::kObserve, *r.raw_result);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(std::get<wire::ObserveResult>(*res).state, wire::ObserveState::kUnknown);
  EXPECT_FALSE(std::get<wire::ObserveResult>(*res).operation.has_value());
}

TEST_F(RequestQueueTest, ResponseOfAClosedConnectionIsDroppedButRecorded) {
  queue_->OnRequest(Req(1, wire::Operation::kKill, 1));
  queue_->OnGone();
  executor_.started[0]->done(ExecOutcome{});
  EXPECT_TRUE(sent_.empty());
  Live();
  queue_->OnRequest(Req(2, wire::Operation::kObserve, 1));
  absl::StatusOr<wire::Result> res =
      wire::DecodeResult(wire::Operation::kObserve, *Sent(0).raw_result);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(std::get<wire::ObserveResult>(*res).state, wire::ObserveState::kCompleted);
}

// Found by the chaos soak (tests/chaos, docs/reliability.md): the node answered a mutation
// before its outcome was durable, so a crash in between (or a full state disk) left Core with
// `ok` and the record with `running`, which the next start completes as `uncertain`: two final
// outcomes for one request.
TEST_F(RequestQueueTest, AMutationIsAnsweredOnlyOnceItsOutcomeIsDurable) {
  std::string on_disk_when_answered;
  queue_->OnLive({kConn, 5}, [this, &on_disk_when_answered](std::string s) {
    on_disk_when_answered = OnDisk(Uuid(1));
    sent_.push_back(std::move(s));
  });
  queue_->OnRequest(Req(1, wire::Operation::kKill, 1));
  executor_.started[0]->done(ExecOutcome{});
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_FALSE(Sent(0).error_code.has_value());
  EXPECT_NE(on_disk_when_answered.find("\"state\":\"completed\""), std::string::npos)
      << on_disk_when_answered;
}

// The same order for a mutation whose budget ends before it starts: `unavailable` is
// durable before it is answered.
TEST_F(RequestQueueTest, AnExpiredMutationIsAnsweredOnlyOnceItsOutcomeIsDurable) {
  std::string on_disk_when_answered;
  queue_->OnLive({kConn, 5}, [this, &on_disk_when_answered](std::string s) {
    on_disk_when_answered = OnDisk(Uuid(2));
    sent_.push_back(std::move(s));
  });
  queue_->OnRequest(Req(1, wire::Operation::kKillCompute, 1, 60000));  // running
  queue_->OnRequest(Req(2, wire::Operation::kKill, 1, 1000));          // queued behind it
  clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(Sent(0).error_code, "unavailable");
  EXPECT_NE(on_disk_when_answered.find("\"state\":\"completed\""), std::string::npos)
      << on_disk_when_answered;
}

TEST_F(RequestQueueTest, AnOutcomeThatCannotBeRecordedIsAnsweredUncertainAsTheRecordWillSay) {
  queue_->OnRequest(Req(1, wire::Operation::kKill, 1));
  // The record cannot be written from here (a full state disk, as in the soak).
  fs_.SetByteBudget(0);
  executor_.started[0]->done(ExecOutcome{});
  fs_.SetByteBudget(std::nullopt);
  EXPECT_EQ(ResponseFor(1)->error_code, "uncertain");
  // observe says the same now (not `running` for ever) and after a restart (durably).
  ExpectObservedCompleted(2, 1, "uncertain");
  Reset();
  EXPECT_EQ(record_->Find(Uuid(1))->response->error_code, "uncertain");
}

// Found by the 2-hour chaos soak of 2026-12-07 (21:26:08, docs/reliability.md finding 7): a
// mutation whose start could not be recorded (a full state disk) was answered `unavailable`,
// but its record stayed `queued` in memory too, so Core's observe of it said `queued` — an
// answered request reported as still to run.
TEST_F(RequestQueueTest, AStartThatCannotBeRecordedIsObservedAsItWasAnswered) {
  queue_->OnRequest(Req(1, wire::Operation::kKillCompute, 1));  // running
  queue_->OnRequest(Req(2, wire::Operation::kKill, 1));         // queued behind it
  ASSERT_EQ(executor_.started.size(), 1u);
  // The record cannot be written from here (a full state disk): 1's outcome is answered
  // `uncertain`, 2's start cannot be recorded, so 2 never runs and is answered `unavailable`.
  fs_.SetByteBudget(0);
  executor_.started[0]->done(ExecOutcome{});
  fs_.SetByteBudget(std::nullopt);
  EXPECT_EQ(ResponseFor(1)->error_code, "uncertain");
  EXPECT_EQ(ResponseFor(2)->error_code, "unavailable");
  EXPECT_EQ(executor_.started.size(), 1u);
  // observe of 2 says what Core was answered, now and after a restart.
  ExpectObservedCompleted(3, 2, "unavailable");
  Reset();
  EXPECT_EQ(record_->Find(Uuid(2))->response->error_code, "unavailable");
}

TEST_F(RequestQueueTest, ExecOutputsAreNeverPersisted) {
  queue_->OnRequest(Req(1, wire::Operation::kExec, 1));
  executor_.started[0]->done(
      Success(wire::Result(wire::ExecResult{3, "TOPSECRETOUT", "TOPSECRETERR", false})));
  EXPECT_NE(sent_[0].find("VE9QU0VDUkVUT1VU"), std::string::npos);  // the live answer has it
  const std::string text = AllOnDisk();
  ASSERT_NE(text.find(Uuid(1)), std::string::npos);
  EXPECT_EQ(text.find("VE9QU0VDUkVUT1VU"), std::string::npos);
  EXPECT_EQ(text.find("TOPSECRET"), std::string::npos);
  const auto& exec = std::get<wire::ExecResult>(*record_->Find(Uuid(1))->response->result);
  EXPECT_EQ(exec.exit_code, 3);
  EXPECT_TRUE(exec.truncated);
  EXPECT_TRUE(exec.stdout_bytes.empty());
}

TEST_F(RequestQueueTest, RestartCompletesInterruptedMutationsHonestly) {
  executor_.on_execute = [](Started&) {};
  queue_->OnRequest(Req(1, wire::Operation::kKillCompute, 1));  // running
  queue_->OnRequest(Req(2, wire::Operation::kKill, 1));         // queued behind it
  Reset();  // the agent restarts: a new record reads the same directory
  EXPECT_EQ(record_->Find(Uuid(1))->response->error_code, "uncertain");
  EXPECT_EQ(record_->Find(Uuid(2))->response->error_code, "unavailable");
}

TEST_F(RequestQueueTest, ActiveOperationsListQueuedAndRunning) {
  queue_->OnRequest(Req(1, wire::Operation::kKillCompute, 1));
  queue_->OnRequest(Req(2, wire::Operation::kKill, 1));
  std::vector<wire::ActiveOperation> active = queue_->ActiveOperations();
  ASSERT_EQ(active.size(), 2u);
  EXPECT_EQ(active[0].id, Uuid(1));
  EXPECT_EQ(active[0].state, wire::ActiveState::kRunning);
  EXPECT_EQ(active[1].state, wire::ActiveState::kQueued);
  EXPECT_EQ(active[1].operation, "kill");
}

}  // namespace
}  // namespace sn::agent::testing

namespace sn::agent::testing {
namespace {

TEST_F(RequestQueueTest, CreateOfASandboxKilledWithinTheRecordWindowIsAConflict) {
  queue_->OnRequest(Req(1, wire::Operation::kKill, 1));
  queue_->OnRequest(Req(2, wire::Operation::kCreate, 1));  // queued behind the kill
  ASSERT_EQ(executor_.started.size(), 1u);
  executor_.started[0]->done(ExecOutcome{});  // the kill succeeded
  // The create never reaches the provider.
  EXPECT_EQ(executor_.started.size(), 1u);
  EXPECT_EQ(LastError(), "conflict");
  EXPECT_EQ(record_->Find(Uuid(2))->response->error_code, "conflict");
  // The window survives a restart of the agent.
  Reset();
  queue_->OnRequest(Req(3, wire::Operation::kCreate, 1));
  EXPECT_EQ(executor_.started.size(), 1u);
  EXPECT_EQ(LastError(), "conflict");
  // Another sandbox is unaffected.
  queue_->OnRequest(Req(4, wire::Operation::kCreate, 2));
  EXPECT_EQ(executor_.started.size(), 2u);
}

TEST_F(RequestQueueTest, AFailedKillDoesNotSpendTheSandboxId) {
  queue_->OnRequest(Req(1, wire::Operation::kKill, 1));
  ExecOutcome not_found;
  not_found.error_code = "not_found";
  executor_.started[0]->done(not_found);
  queue_->OnRequest(Req(2, wire::Operation::kCreate, 1));
  EXPECT_EQ(executor_.started.size(), 2u);
}

}  // namespace
}  // namespace sn::agent::testing

namespace sn::agent::testing {
namespace {

// Finding 11: a hostile Core cannot grow the durable record without bound. At the bound a
// mutation is answered `unavailable`, neither recorded nor run; reads and observe still work.
TEST_F(RequestQueueTest, AtTheRecordBoundAMutationIsUnavailableNeitherRecordedNorRun) {
  Reset(/*node_wide_limit=*/64, /*max_records=*/3);
  for (int i = 1; i <= 3; ++i) {
    queue_->OnRequest(Req(i, wire::Operation::kKill, i));
    executor_.started.back()->done(ExecOutcome{});
  }
  queue_->OnRequest(Req(4, wire::Operation::kKill, 4));
  EXPECT_EQ(LastError(), "unavailable");
  EXPECT_EQ(executor_.started.size(), 3u);
  EXPECT_EQ(record_->Find(Uuid(4)), nullptr);
  EXPECT_EQ(OnDisk(Uuid(4)), "");
  EXPECT_EQ(queue_->in_flight(), 0u);

  queue_->OnRequest(Req(5, wire::Operation::kInspect, 5));  // reads are not recorded
  EXPECT_EQ(executor_.started.size(), 4u);
  queue_->OnRequest(Req(6, wire::Operation::kObserve, 1));
  absl::StatusOr<wire::Result> res =
      wire::DecodeResult(wire::Operation::kObserve, *Sent(sent_.size() - 1).raw_result);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(std::get<wire::ObserveResult>(*res).state, wire::ObserveState::kCompleted);
}

TEST_F(RequestQueueTest, AFullRecordAcceptsMutationsAgainOnceItsRecordsAreADayOld) {
  Reset(/*node_wide_limit=*/64, /*max_records=*/3);
  for (int i = 1; i <= 3; ++i) {
    queue_->OnRequest(Req(i, wire::Operation::kKillCompute, i));
    executor_.started.back()->done(ExecOutcome{});
  }
  clock_.Advance(absl::Hours(23));
  queue_->OnRequest(Req(4, wire::Operation::kKillCompute, 4));
  EXPECT_EQ(LastError(), "unavailable");  // every record is younger than the spec's 24 h
  EXPECT_NE(record_->Find(Uuid(1)), nullptr);
  clock_.Advance(absl::Hours(1) + absl::Seconds(1));
  queue_->OnRequest(Req(5, wire::Operation::kKillCompute, 5));
  EXPECT_EQ(executor_.started.size(), 4u);  // accepted and run
  EXPECT_NE(record_->Find(Uuid(5)), nullptr);
  EXPECT_EQ(record_->Find(Uuid(1)), nullptr);  // the day-old records made room
}

// ---- payloads wait for privhelper's admission bound (docs/protocol.md 23a) -----------------
// The bound here is 100 bytes with 10 bytes counted per call beside its payload.

class PayloadBoundTest : public RequestQueueTest {
 protected:
  PayloadBoundTest() {
    payload_limit_ = 100;
    payload_overhead_ = 10;
    Reset();
  }
};

TEST_F(PayloadBoundTest, PayloadsBeyondTheBoundWaitInArrivalOrderAndStartWhenAnswersFreeBytes) {
  queue_->OnRequest(Write(1, 40, 1));  // 50
  queue_->OnRequest(Write(2, 40, 2));  // 100: the bound exactly
  queue_->OnRequest(Write(3, 40, 3));  // waits
  queue_->OnRequest(ExecWithStdin(4, 5, 4));  // 15: would fit after 3 alone, waits behind it
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1), Uuid(2)}));
  EXPECT_EQ(queue_->payload_bytes_in_flight(), 100u);
  EXPECT_EQ(queue_->payloads_waiting(), 2u);
  EXPECT_TRUE(sent_.empty());  // nobody answered: waiting is not a refusal
  // Waiting is not started: the durable record still says queued, and so does the heartbeat.
  EXPECT_EQ(record_->Find(Uuid(3))->state, RecordState::kQueued);
  EXPECT_EQ(record_->Find(Uuid(4))->state, RecordState::kQueued);
  for (const wire::ActiveOperation& a : queue_->ActiveOperations()) {
    if (a.id == Uuid(3) || a.id == Uuid(4)) {
      EXPECT_EQ(a.state, wire::ActiveState::kQueued) << a.id;
    }
  }

  executor_.started[0]->done(Written(40));  // frees 50: 3 starts (100), 4 does not fit
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1), Uuid(2), Uuid(3)}));
  EXPECT_EQ(record_->Find(Uuid(3))->state, RecordState::kRunning);
  EXPECT_EQ(queue_->payload_bytes_in_flight(), 100u);
  executor_.started[1]->done(Written(40));
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1), Uuid(2), Uuid(3), Uuid(4)}));
  EXPECT_EQ(queue_->payload_bytes_in_flight(), 65u);
  EXPECT_EQ(queue_->payloads_waiting(), 0u);
  executor_.started[2]->done(Written(40));
  executor_.started[3]->done(ExecOutcome{});
  EXPECT_EQ(queue_->payload_bytes_in_flight(), 0u);
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(ResponseFor(id).has_value()) << id;
    EXPECT_EQ(ResponseFor(id)->error_code, std::nullopt) << id;
  }
}

TEST_F(PayloadBoundTest, RequestsWithoutAPayloadNeverWaitForPayloads) {
  queue_->OnRequest(Write(1, 90, 1));
  queue_->OnRequest(Write(2, 90, 2));  // waits
  queue_->OnRequest(Req(3, wire::Operation::kInspect, 3));
  queue_->OnRequest(Req(4, wire::Operation::kExec, 4));  // no stdin: no payload
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1), Uuid(3), Uuid(4)}));
  EXPECT_EQ(queue_->payloads_waiting(), 1u);
}

TEST_F(PayloadBoundTest, OnePayloadAloneIsNeverHeldBackByTheBound) {
  queue_->OnRequest(Write(1, 500, 1));  // above the bound, but nothing else is counted
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1)}));
  queue_->OnRequest(Write(2, 1, 2));
  EXPECT_EQ(queue_->payloads_waiting(), 1u);
  executor_.started[0]->done(Written(500));
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1), Uuid(2)}));
}

TEST_F(PayloadBoundTest, BudgetExpiryWhileWaitingAnswersUnavailableWithoutNativeCallAndRecordsIt) {
  queue_->OnRequest(Write(1, 80, 1, /*timeout_ms=*/60000));
  queue_->OnRequest(Write(2, 80, 2, /*timeout_ms=*/3000));  // waits
  clock_.Advance(absl::Milliseconds(2999));
  EXPECT_FALSE(ResponseFor(2).has_value());
  clock_.Advance(absl::Milliseconds(1));  // budget anchored at receipt, consumed while waiting
  ASSERT_TRUE(ResponseFor(2).has_value());
  EXPECT_EQ(ResponseFor(2)->error_code, "unavailable");
  EXPECT_EQ(executor_.started.size(), 1u);  // privhelper was never called for it
  const RecordEntry* e = record_->Find(Uuid(2));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, RecordState::kCompleted);
  EXPECT_EQ(e->response->error_code, "unavailable");
  EXPECT_EQ(queue_->payloads_waiting(), 0u);
  EXPECT_EQ(queue_->in_flight(), 1u);
  executor_.started[0]->done(Written(80));
  EXPECT_EQ(executor_.started.size(), 1u);  // the expired request never starts
  EXPECT_EQ(queue_->payload_bytes_in_flight(), 0u);
}

TEST_F(PayloadBoundTest, AWaitingHeadThatExpiresLetsTheNextWaiterStart) {
  queue_->OnRequest(Write(1, 50, 1, /*timeout_ms=*/60000));  // 60
  queue_->OnRequest(Write(2, 50, 2, /*timeout_ms=*/1000));   // 60: waits
  queue_->OnRequest(Write(3, 20, 3, /*timeout_ms=*/60000));  // 30 would fit, waits behind 2
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1)}));
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(ResponseFor(2)->error_code, "unavailable");
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1), Uuid(3)}));
  EXPECT_EQ(queue_->payload_bytes_in_flight(), 90u);
}

TEST_F(PayloadBoundTest, PayloadBytesAreFreedByEveryKindOfAnswer) {
  // Each answer the executor gives: a typed failure, privhelper's refusal or an unreachable
  // privhelper (`unavailable`), a lost connection mid-call (`uncertain`), and a final outcome
  // that arrives after the budget ended (the bytes stay counted until then: privhelper holds
  // the call until it answers).
  const std::vector<std::string> codes = {"failed", "unavailable", "uncertain", "not_found"};
  int id = 1;
  for (const std::string& code : codes) {
    queue_->OnRequest(Write(id, 80, id));
    queue_->OnRequest(Write(id + 1, 80, id + 1));  // waits for the first's answer
    ASSERT_EQ(executor_.started.size(), static_cast<size_t>(id)) << code;
    executor_.started.back()->done(ExecOutcome{std::nullopt, code, std::nullopt, std::nullopt});
    EXPECT_EQ(ResponseFor(id)->error_code, code);
    ASSERT_EQ(executor_.started.size(), static_cast<size_t>(id + 1)) << code;
    EXPECT_EQ(executor_.started.back()->request.id, Uuid(id + 1));
    executor_.started.back()->done(Written(80));
    EXPECT_EQ(queue_->payload_bytes_in_flight(), 0u) << code;
    id += 2;
  }

  queue_->OnRequest(Write(id, 80, id, /*timeout_ms=*/1000));
  queue_->OnRequest(Write(id + 1, 80, id + 1, /*timeout_ms=*/60000));
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(ResponseFor(id)->error_code, "uncertain");  // started: answered at the budget's end
  EXPECT_EQ(queue_->payloads_waiting(), 1u);  // but privhelper still holds its bytes
  executor_.started.back()->done(Written(80));  // its final outcome, recorded
  EXPECT_EQ(executor_.started.back()->request.id, Uuid(id + 1));
  EXPECT_EQ(queue_->payload_bytes_in_flight(), 90u);
}

TEST_F(PayloadBoundTest, AStartThatCannotBeRecordedFreesItsBytesForTheNextWaiter) {
  queue_->OnRequest(Write(1, 80, 1));
  queue_->OnRequest(Write(2, 80, 2));  // waits
  queue_->OnRequest(Write(3, 80, 3));  // waits
  // The record cannot be written from here: 2's start fails (`unavailable`, not run), and the
  // bytes it took are free again at once for 3, whose start fails the same way.
  // (A full state disk.)
  fs_.SetByteBudget(0);
  executor_.started[0]->done(Written(80));
  fs_.SetByteBudget(std::nullopt);
  EXPECT_EQ(ResponseFor(2)->error_code, "unavailable");
  EXPECT_EQ(ResponseFor(3)->error_code, "unavailable");
  EXPECT_EQ(executor_.started.size(), 1u);
  EXPECT_EQ(queue_->payload_bytes_in_flight(), 0u);
  EXPECT_EQ(queue_->payloads_waiting(), 0u);
}

TEST_F(PayloadBoundTest, WaitingKeepsEachSandboxsSequenceOrder) {
  queue_->OnRequest(Write(1, 80, 1));
  queue_->OnRequest(Write(2, 80, 2));  // waits
  queue_->OnRequest(Req(3, wire::Operation::kInspect, 2));  // behind 2 in sandbox 2's order
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1)}));
  executor_.started[0]->done(Written(80));
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1), Uuid(2)}));
  executor_.started[1]->done(Written(80));
  EXPECT_EQ(StartedIds(), (std::vector<std::string>{Uuid(1), Uuid(2), Uuid(3)}));
}

}  // namespace
}  // namespace sn::agent::testing

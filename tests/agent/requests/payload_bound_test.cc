// Payloads wait for privhelper's admission bound (docs/protocol.md 23a).
#include "tests/agent/requests/request_queue_fixture.h"

namespace sn::agent::testing {
namespace {

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

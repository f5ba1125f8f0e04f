// The request path (spec §4-§5): sequence, the pending and node-wide bounds, the generation
// gate, per-sandbox order, budgets. The durable record: request_record_test.cc; payloads:
// payload_bound_test.cc.
#include "tests/agent/requests/request_queue_fixture.h"

namespace sn::agent::testing {
namespace {

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

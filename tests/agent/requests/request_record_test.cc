// The request path and the durable operation record (spec §5, "Durable record"; docs/formats.md):
// what is recorded and when, durable before answered, outcomes that cannot be written, restarts,
// the kill window, the record's bound.
#include "tests/agent/requests/request_queue_fixture.h"

namespace sn::agent::testing {
namespace {

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

}  // namespace
}  // namespace sn::agent::testing

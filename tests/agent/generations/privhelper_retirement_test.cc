// GrpcGenerationCollector (agent/generations/privhelper_retirement.h) against an in-process
// gRPC privhelper: the pair it sends, privhelper's typed answers as the agent reads them, and
// results delivered through `post` only.
#include "agent/generations/privhelper_retirement.h"

#include <deque>
#include <functional>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/agent/fakes/fake_privhelper.h"
#include "tests/agent/fakes/test_support.h"
#include "tests/release/fixture.h"

namespace sn::agent {
namespace {

namespace pbf = ::sn::privhelper::v1;

class CollectorTest : public ::testing::Test {
 protected:
  CollectorTest() : privhelper_(release::testing::NewKey().public_key()) {}

  CollectResult Collect(const std::string& socket) {
    GrpcGenerationCollector c(socket, [this](std::function<void()> fn) { loop_.Post(fn); });
    std::optional<CollectResult> result;
    std::unique_ptr<CollectCall> call =
        c.Collect({3, std::string(64, '3')}, [&](CollectResult r) { result = std::move(r); });
    EXPECT_FALSE(result.has_value());  // never inside Collect
    EXPECT_TRUE(loop_.RunUntil([&] { return result.has_value(); }, absl::Seconds(30)));
    return result.value_or(CollectResult{});
  }

  testing::FakePrivhelperServer privhelper_;
  testing::PostedLoop loop_;
};

TEST_F(CollectorTest, SendsThePairAndDeliversDroppedThroughPost) {
  pbf::CollectGenerationResult answer;
  answer.set_outcome(pbf::COLLECT_OUTCOME_DROPPED);
  answer.set_state(pbf::GENERATION_STATE_DROPPED);
  privhelper_.service.SetCollectAnswer(answer);
  CollectResult r = Collect(privhelper_.socket);
  EXPECT_EQ(r.outcome, CollectOutcome::kDropped);
  EXPECT_EQ(r.state, HeldState::kDropped);
  std::vector<pbf::CollectGenerationRequest> sent = privhelper_.service.collect_requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].generation(), 3);
  EXPECT_EQ(sent[0].specification_digest(), std::string(64, '3'));
}

TEST_F(CollectorTest, DroppedAnswerNamingAnotherStateIsNotBelieved) {
  pbf::CollectGenerationResult answer;
  answer.set_outcome(pbf::COLLECT_OUTCOME_DROPPED);
  answer.set_state(pbf::GENERATION_STATE_READY);
  privhelper_.service.SetCollectAnswer(answer);
  EXPECT_EQ(Collect(privhelper_.socket).outcome, CollectOutcome::kFailed);
}

TEST_F(CollectorTest, HeldAndRefusedKeepTheirReasonAndDiagnostic) {
  pbf::CollectGenerationResult held;
  held.set_outcome(pbf::COLLECT_OUTCOME_HELD);
  held.set_reason("native helper pid 9 not yet reaped");
  held.set_state(pbf::GENERATION_STATE_READY);
  privhelper_.service.SetCollectAnswer(held);
  CollectResult h = Collect(privhelper_.socket);
  EXPECT_EQ(h.outcome, CollectOutcome::kHeld);
  EXPECT_EQ(h.reason, "native helper pid 9 not yet reaped");
  EXPECT_EQ(h.state, HeldState::kReady);

  pbf::CollectGenerationResult refused;
  refused.set_outcome(pbf::COLLECT_OUTCOME_REFUSED);
  refused.set_diagnostic(pbf::OWNERSHIP_REFUSED);
  refused.set_state(pbf::GENERATION_STATE_READY);
  privhelper_.service.SetCollectAnswer(refused);
  CollectResult f = Collect(privhelper_.socket);
  EXPECT_EQ(f.outcome, CollectOutcome::kRefused);
  EXPECT_EQ(f.diagnostic, Diagnostic::kOwnershipRefused);
}

TEST_F(CollectorTest, UnreachablePrivhelperIsAFailureThatChangesNoState) {
  CollectResult r = Collect("/tmp/no-such-privhelper.sock");
  EXPECT_EQ(r.outcome, CollectOutcome::kFailed);
  EXPECT_FALSE(r.state.has_value());
}

}  // namespace
}  // namespace sn::agent

// The connection state machine's clocks: heartbeat cadence, idle timeout, backoff (spec §1).
#include "tests/agent/fakes/connection_fixture.h"

namespace sn::agent::testing {
namespace {

using State = Connection::State;

size_t CountHeartbeats(ConnectionTest* t, FakeTransport& tr) {
  size_t n = 0;
  for (const std::string& s : tr.sent) {
    absl::StatusOr<wire::Frame> f = wire::Decode(s, wire::Role::kCore);
    if (f.ok() && std::holds_alternative<wire::Heartbeat>(*f)) ++n;
  }
  (void)t;
  return n;
}

TEST_F(ConnectionTest, FirstHeartbeatTenSecondsAfterWelcomeThenEveryTenSeconds) {
  GoLive(5);
  clock_.Advance(absl::Milliseconds(9999));
  EXPECT_EQ(CountHeartbeats(this, transport_), 0u);
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_EQ(CountHeartbeats(this, transport_), 1u);
  wire::Frame f = SentFrame(1);
  ASSERT_TRUE(std::holds_alternative<wire::Heartbeat>(f));
  const auto& hb = std::get<wire::Heartbeat>(f);
  EXPECT_EQ(hb.connection_id, kConnectionId);
  EXPECT_EQ(hb.owner_epoch, 5);
  EXPECT_EQ(hb.health.provider_ready, std::optional<bool>(true));
  EXPECT_FALSE(hb.generations.has_value());
  transport_.Receive(AckText(5));
  clock_.Advance(absl::Seconds(10));
  transport_.Receive(AckText(5));
  clock_.Advance(absl::Seconds(10));
  EXPECT_EQ(CountHeartbeats(this, transport_), 3u);
  EXPECT_EQ(health_.collects, 4);  // hello + three heartbeats: a fresh probe for each
  EXPECT_EQ(conn_->state(), State::kLive);
}

TEST_F(ConnectionTest, HeartbeatCarriesTheRequestLayersActiveOperations) {
  sink_.active.push_back({"55555555-5555-4555-8555-555555555555", "create",
                          wire::ActiveState::kRunning});
  GoLive(5);
  clock_.Advance(absl::Seconds(10));
  wire::Frame f = SentFrame(1);
  ASSERT_TRUE(std::holds_alternative<wire::Heartbeat>(f));
  EXPECT_EQ(std::get<wire::Heartbeat>(f).health.active_operations, sink_.active);
}

TEST_F(ConnectionTest, SlowHealthCollectionSkipsATickInsteadOfQueueing) {
  GoLive(5);
  health_.manual = true;
  clock_.Advance(absl::Seconds(20));
  EXPECT_EQ(health_.pending.size(), 1u);
  health_.CompleteAll();
  EXPECT_EQ(CountHeartbeats(this, transport_), 1u);
}

TEST_F(ConnectionTest, HeartbeatAckWithAnotherEpochClosesWith4005) {
  GoLive(5);
  clock_.Advance(absl::Seconds(10));
  transport_.Receive(AckText(6));
  ExpectClosedWith(wire::kCloseEpochMismatch);
  EXPECT_EQ(sink_.gone, 1);
}

TEST_F(ConnectionTest, HeartbeatAckWithAnotherConnectionIdClosesWith4006) {
  GoLive(5);
  clock_.Advance(absl::Seconds(10));
  transport_.Receive(AckText(5, kOtherConnectionId));
  ExpectClosedWith(wire::kCloseCorrelation);
}

TEST_F(ConnectionTest, ThirtyFiveSecondsWithoutAFrameClosesWith4001) {
  GoLive(5);
  clock_.Advance(absl::Milliseconds(34999));
  EXPECT_TRUE(transport_.close_codes.empty());
  clock_.Advance(absl::Milliseconds(1));
  ExpectClosedWith(wire::kCloseIdle);
}

TEST_F(ConnectionTest, AnyReceivedFrameResetsTheIdleTimer) {
  GoLive(5);
  clock_.Advance(absl::Seconds(30));
  transport_.Ping();  // a WebSocket ping counts
  clock_.Advance(absl::Seconds(30));
  EXPECT_TRUE(transport_.close_codes.empty());
  transport_.Receive(AckText(5));
  clock_.Advance(absl::Seconds(34));
  EXPECT_TRUE(transport_.close_codes.empty());
  clock_.Advance(absl::Seconds(1));
  ExpectClosedWith(wire::kCloseIdle);
}

TEST_F(ConnectionTest, IdleTimeoutAlsoAppliesBeforeWelcome) {
  Make();
  conn_->Start();
  transport_.Upgrade();
  clock_.Advance(absl::Seconds(35));
  ExpectClosedWith(wire::kCloseIdle);
}

TEST_F(ConnectionTest, BackoffCeilingDoublesUpToSixtySeconds) {
  random_ = 1.0;  // the top of every jitter window
  Make();
  conn_->Start();
  const int64_t expected[] = {1, 2, 4, 8, 16, 32, 60, 60, 60};
  for (int64_t seconds : expected) {
    SCOPED_TRACE(seconds);
    transport_.Refuse(503);
    EXPECT_EQ(conn_->last_backoff_delay(), absl::Seconds(seconds));
    clock_.Advance(absl::Seconds(seconds));
    EXPECT_TRUE(transport_.dialing);
  }
}

TEST_F(ConnectionTest, BackoffJitterCanBeZero) {
  random_ = 0.0;
  Make();
  conn_->Start();
  transport_.Refuse(503);
  EXPECT_EQ(conn_->last_backoff_delay(), absl::ZeroDuration());
  clock_.Advance(absl::ZeroDuration());
  EXPECT_EQ(transport_.dials, 2);
}

TEST_F(ConnectionTest, ConnectionLiveForSixtySecondsResetsTheBackoff) {
  random_ = 1.0;
  Make();
  conn_->Start();
  for (int i = 0; i < 5; ++i) {  // ceilings 1, 2, 4, 8, 16
    transport_.Refuse(503);
    clock_.Advance(conn_->last_backoff_delay());
  }
  transport_.Upgrade();
  transport_.Receive(WelcomeText(5));
  for (int i = 0; i < 6; ++i) {  // stay live for 60 s, acknowledging every heartbeat
    clock_.Advance(absl::Seconds(10));
    transport_.Receive(AckText(5));
  }
  transport_.PeerClose(1001);
  EXPECT_EQ(conn_->last_backoff_delay(), absl::Seconds(1));
}

TEST_F(ConnectionTest, ShortLivedConnectionKeepsGrowingTheBackoff) {
  random_ = 1.0;
  Make();
  conn_->Start();
  for (int i = 0; i < 3; ++i) {  // ceilings 1, 2, 4
    transport_.Refuse(503);
    clock_.Advance(conn_->last_backoff_delay());
  }
  transport_.Upgrade();
  transport_.Receive(WelcomeText(5));
  clock_.Advance(absl::Seconds(59));
  transport_.PeerClose(1001);
  EXPECT_EQ(conn_->last_backoff_delay(), absl::Seconds(8));
}

}  // namespace
}  // namespace sn::agent::testing

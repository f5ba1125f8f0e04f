// The connection state machine: dial rules, hello, welcome and the owner epoch (spec §1, §3).
#include <unistd.h>

#include <cstdlib>

#include "agent/state/state_files.h"
#include "tests/agent/fakes/connection_fixture.h"

namespace sn::agent::testing {
namespace {

using State = Connection::State;

TEST_F(ConnectionTest, StartDialsWithTheControlFrameReadLimit) {
  Make();
  conn_->Start();
  EXPECT_EQ(transport_.dials, 1);
  EXPECT_EQ(transport_.read_limit(), wire::kMaxControlFrameBytes);
  EXPECT_EQ(conn_->state(), State::kDialing);
}

TEST_F(ConnectionTest, Http401StopsRetryingAndReportsUnauthenticated) {
  Make();
  conn_->Start();
  transport_.Refuse(401);
  EXPECT_EQ(conn_->state(), State::kStopped);
  ASSERT_TRUE(done_.has_value());
  EXPECT_TRUE(absl::IsUnauthenticated(*done_));
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(transport_.dials, 1);
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

TEST_F(ConnectionTest, Http409IsRetriedWithBackoff) {
  Make();
  conn_->Start();
  transport_.Refuse(409);
  EXPECT_EQ(conn_->state(), State::kBackoff);
  EXPECT_FALSE(done_.has_value());
  EXPECT_EQ(conn_->last_backoff_delay(), absl::Milliseconds(500));  // 0.5 x 1 s
  clock_.Advance(absl::Milliseconds(499));
  EXPECT_EQ(transport_.dials, 1);
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(transport_.dials, 2);
}

TEST_F(ConnectionTest, ProxyForbiddenAndTransportErrorsAreRetried) {
  Make();
  conn_->Start();
  transport_.Refuse(403);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(transport_.dials, 2);
  transport_.CompleteDial({DialResult::Kind::kTransportError, 0, "connection refused"});
  EXPECT_EQ(conn_->state(), State::kBackoff);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(transport_.dials, 3);
  transport_.Refuse(503);
  EXPECT_EQ(conn_->state(), State::kBackoff);
  EXPECT_FALSE(done_.has_value());
}

TEST_F(ConnectionTest, HelloCarriesIdentityAndFirstHealthReport) {
  Make();
  conn_->Start();
  transport_.Upgrade();
  ASSERT_EQ(transport_.sent.size(), 1u);
  wire::Frame f = SentFrame(0);
  ASSERT_TRUE(std::holds_alternative<wire::Hello>(f));
  const auto& hello = std::get<wire::Hello>(f);
  EXPECT_EQ(hello.node_id, kNodeId);
  EXPECT_EQ(hello.installation_id, kInstallationId);
  EXPECT_EQ(hello.provider, "docker");
  EXPECT_EQ(hello.backend_fingerprint, "docker/20.10.24 overlay2 cgroupfs");
  EXPECT_EQ(hello.deployment_generation, 7);
  EXPECT_EQ(hello.specification_digest, kDigest);
  EXPECT_EQ(hello.max_active, 16);
  EXPECT_EQ(hello.max_retained, 64);
  EXPECT_FALSE(hello.generation_management);
  EXPECT_EQ(hello.health.provider_ready, std::optional<bool>(true));
  EXPECT_EQ(hello.health.host.load_1m, "0.25");
  EXPECT_EQ(health_.collects, 1);
  EXPECT_EQ(conn_->state(), State::kAwaitingWelcome);
}

// The limits are privhelper's: a hello reports those of its own probe when it had them (the
// privhelper configuration may have changed since the agent started), else the start-up ones.
TEST_F(ConnectionTest, HelloReportsTheLimitsOfItsOwnProbeElseTheStartupOnes) {
  health_.report.limits = ProviderLimits{4, 8};
  Make();
  conn_->Start();
  transport_.Upgrade();
  const wire::Hello hello = std::get<wire::Hello>(SentFrame(0));
  EXPECT_EQ(hello.max_active, 4);
  EXPECT_EQ(hello.max_retained, 8);

  health_.report.limits.reset();  // the next probe failed: the start-up limits
  transport_.PeerClose(1011);
  clock_.Advance(absl::Seconds(1));
  transport_.Upgrade();
  ASSERT_EQ(transport_.sent.size(), 2u);
  const wire::Hello again = std::get<wire::Hello>(SentFrame(1));
  EXPECT_EQ(again.max_active, 16);
  EXPECT_EQ(again.max_retained, 64);
}

TEST_F(ConnectionTest, NothingIsSentBeforeTheHealthReportIsReady) {
  health_.manual = true;
  Make();
  conn_->Start();
  transport_.Upgrade();
  EXPECT_TRUE(transport_.sent.empty());
  EXPECT_EQ(conn_->state(), State::kAwaitingHello);
  health_.CompleteAll();
  ASSERT_EQ(transport_.sent.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<wire::Hello>(SentFrame(0)));
}

TEST_F(ConnectionTest, HealthReportOfAnEarlierConnectionIsDropped) {
  health_.manual = true;
  Make();
  conn_->Start();
  transport_.Upgrade();
  transport_.PeerClose(1011);
  clock_.Advance(absl::Seconds(1));
  transport_.Upgrade();
  ASSERT_EQ(health_.pending.size(), 2u);
  auto first = std::move(health_.pending[0]);
  first(health_.report);  // stale: the first connection is gone
  EXPECT_TRUE(transport_.sent.empty());
  health_.pending[1](health_.report);
  EXPECT_EQ(transport_.sent.size(), 1u);
}

TEST_F(ConnectionTest, HigherEpochIsPersistedBeforeAnythingElseIsSent) {
  epochs_.stored = 3;
  size_t sent_at_store = 99;
  epochs_.on_store = [&](int64_t) { sent_at_store = transport_.sent.size(); };
  GoLive(9);
  EXPECT_EQ(epochs_.stored, 9);
  EXPECT_EQ(sent_at_store, 1u);  // only the hello went out before the epoch was durable
  EXPECT_EQ(transport_.read_limit(), wire::kMaxFrameBytes);
  ASSERT_EQ(sink_.lives.size(), 1u);
  EXPECT_EQ(sink_.lives[0].owner_epoch, 9);
  EXPECT_EQ(sink_.lives[0].connection_id, kConnectionId);
}

TEST_F(ConnectionTest, EqualEpochIsAcceptedWithoutRewriting) {
  epochs_.stored = 5;
  GoLive(5);
  EXPECT_EQ(epochs_.stores, 0);
}

TEST_F(ConnectionTest, LowerEpochThanStoredClosesWith4005) {
  epochs_.stored = 10;
  Make();
  conn_->Start();
  transport_.Upgrade();
  transport_.Receive(WelcomeText(9));
  ExpectClosedWith(wire::kCloseEpochMismatch);
  EXPECT_EQ(epochs_.stored, 10);
  EXPECT_TRUE(sink_.lives.empty());
  EXPECT_EQ(transport_.sent.size(), 1u);  // the hello only
}

TEST_F(ConnectionTest, EpochThatCannotBePersistedIsNotUsed) {
  epochs_.store_status = absl::InternalError("disk on fire");
  Make();
  conn_->Start();
  transport_.Upgrade();
  transport_.Receive(WelcomeText(9));
  ExpectClosedWith(1011);
  EXPECT_TRUE(sink_.lives.empty());
  clock_.Advance(absl::Seconds(20));
  EXPECT_EQ(transport_.sent.size(), 1u);  // the hello; never a heartbeat
  EXPECT_EQ(transport_.dials, 2);
}

// A crash after the durable write and before the epoch is used: a new process (new store on
// the same file) refuses the lower epoch and accepts the persisted one.
TEST_F(ConnectionTest, CrashBetweenPersistAndUseRecoversTheHigherEpoch) {
  char tmpl[] = "/tmp/agent-epoch-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/owner_epoch";
  {
    FileEpochStore store(path);
    ASSERT_TRUE(store.Store(4).ok());
    Make(&store);
    conn_->Start();
    transport_.Upgrade();
    transport_.Receive(WelcomeText(12));
    ASSERT_EQ(conn_->state(), State::kLive);
    conn_.reset();  // the crash: nothing after the persist ran
  }
  FileEpochStore recovered(path);
  absl::StatusOr<int64_t> epoch = recovered.Load();
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(*epoch, 12);

  transport_ = FakeTransport();
  Make(&recovered);
  conn_->Start();
  transport_.Upgrade();
  transport_.Receive(WelcomeText(11));
  ExpectClosedWith(wire::kCloseEpochMismatch);
  clock_.Advance(absl::Seconds(1));
  transport_.Upgrade();
  transport_.Receive(WelcomeText(12));
  EXPECT_EQ(conn_->state(), State::kLive);
  unlink(path.c_str());
  rmdir(tmpl);
}

TEST_F(ConnectionTest, Close4004StopsRetryingLikeA401) {
  GoLive();
  transport_.PeerClose(wire::kCloseCredentialRejected);
  EXPECT_EQ(conn_->state(), State::kStopped);
  ASSERT_TRUE(done_.has_value());
  EXPECT_TRUE(absl::IsUnauthenticated(*done_));
  EXPECT_EQ(sink_.gone, 1);
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(transport_.dials, 1);
}

TEST_F(ConnectionTest, Close4003ReconnectsAfterTheMaximumDelay) {
  Make();
  conn_->Start();
  transport_.Upgrade();
  transport_.PeerClose(wire::kCloseIdentityMismatch);
  EXPECT_EQ(conn_->state(), State::kBackoff);
  EXPECT_EQ(conn_->last_backoff_delay(), absl::Seconds(60));
  clock_.Advance(absl::Seconds(59));
  EXPECT_EQ(transport_.dials, 1);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(transport_.dials, 2);
}

TEST_F(ConnectionTest, EveryOtherPeerCloseReconnects) {
  for (int code : {1000, 1001, 1008, 1009, 4001, 4002, 4005, 4006}) {
    SCOPED_TRACE(code);
    transport_ = FakeTransport();
    done_.reset();
    GoLive();
    transport_.PeerClose(code);
    EXPECT_EQ(conn_->state(), State::kBackoff);
    EXPECT_FALSE(done_.has_value());
    clock_.Advance(absl::Seconds(61));
    EXPECT_EQ(transport_.dials, 2);
    conn_.reset();
  }
}

TEST_F(ConnectionTest, StopClosesWithGoingAwayAndReportsOk) {
  GoLive();
  conn_->Stop();
  EXPECT_EQ(transport_.close_codes, std::vector<int>{1001});
  EXPECT_FALSE(done_.has_value());
  transport_.Closed();
  ASSERT_TRUE(done_.has_value());
  EXPECT_TRUE(done_->ok());
  EXPECT_EQ(conn_->state(), State::kStopped);
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(transport_.dials, 1);
}

TEST_F(ConnectionTest, StopDuringBackoffStopsAtOnce) {
  Make();
  conn_->Start();
  transport_.Refuse(502);
  conn_->Stop();
  ASSERT_TRUE(done_.has_value());
  EXPECT_TRUE(done_->ok());
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(transport_.dials, 1);
}

class GenerationManagingConnectionTest : public ConnectionTest {
 protected:
  GenerationManagingConnectionTest() : ConnectionTest(true) {
    params_.generations = &generations_;
    wire::Observation o;
    o.generation = 7;
    o.specification_digest = kDigest;
    o.state = wire::GenerationState::kReady;
    generations_.observations = {o};
  }
  FakeGenerationControl generations_;
};

TEST_F(GenerationManagingConnectionTest, HelloAndEveryHeartbeatCarryTheManagersObservations) {
  GoLive();
  const wire::Frame first = SentFrame(0);
  EXPECT_EQ(std::get<wire::Hello>(first).generations, generations_.observations);
  clock_.Advance(absl::Seconds(10));
  ASSERT_EQ(transport_.sent.size(), 2u);
  const wire::Frame second = SentFrame(1);
  const auto& hb = std::get<wire::Heartbeat>(second);
  ASSERT_TRUE(hb.generations.has_value());
  EXPECT_EQ(*hb.generations, generations_.observations);
  EXPECT_EQ(generations_.observation_calls, 2);  // each message advances the rotation
}

TEST_F(GenerationManagingConnectionTest, DeploymentFactsOfWelcomeAndEveryAckReachTheManager) {
  GoLive();
  ASSERT_EQ(generations_.deployments.size(), 1u);
  EXPECT_EQ(generations_.deployments[0], (wire::Deployment{7, kDigest, std::nullopt}));
  transport_.Receive(AckText(5));
  EXPECT_EQ(generations_.deployments.size(), 2u);
  EXPECT_EQ(generations_.disconnects, 0);
}

TEST_F(GenerationManagingConnectionTest, TheEndOfTheLiveConnectionIsAnnouncedOnce) {
  GoLive();
  transport_.PeerClose(4001);
  EXPECT_EQ(generations_.disconnects, 1);
  // A connection that closes before its welcome delivered no facts: nothing to announce.
  clock_.Advance(absl::Minutes(2));
  transport_.Upgrade();
  transport_.PeerClose(4002);
  EXPECT_EQ(generations_.disconnects, 1);
  // Closing ourselves (an invalid ack) announces it too.
  clock_.Advance(absl::Minutes(2));
  transport_.Upgrade();
  transport_.Receive(WelcomeText(5));
  transport_.Receive(AckText(5, kOtherConnectionId));
  ExpectClosedWith(wire::kCloseCorrelation);
  EXPECT_EQ(generations_.disconnects, 2);
  EXPECT_EQ(generations_.deployments.size(), 2u);  // the bad ack's facts were not taken
}

TEST_F(GenerationManagingConnectionTest, HelloAnnouncesGenerationManagementWithoutReadiness) {
  GoLive();
  wire::Frame f = SentFrame(0);
  ASSERT_TRUE(std::holds_alternative<wire::Hello>(f));
  const auto& hello = std::get<wire::Hello>(f);
  EXPECT_TRUE(hello.generation_management);
  EXPECT_FALSE(hello.health.provider_ready.has_value());
  EXPECT_FALSE(hello.health.diagnostic.has_value());
}

TEST_F(GenerationManagingConnectionTest, WelcomeWithoutDeploymentIsInvalid) {
  Make();
  conn_->Start();
  transport_.Upgrade();
  wire::Welcome w{kConnectionId, 5, std::nullopt};
  transport_.Receive(wire::Encode(wire::Frame(w)));
  ExpectClosedWith(wire::kCloseInvalidFrame);
}

}  // namespace
}  // namespace sn::agent::testing

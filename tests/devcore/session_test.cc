// The pure connection state machine (tools/devcore/session.h), driven by SimulatedClock and a
// fake transport: every Core-side rule of spec/wire.md §1-§3.
#include <string>
#include <variant>

#include "common/wire/codec.h"
#include "common/wire/limits.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/devcore/fixture.h"

namespace sn::devcore::testing {
namespace {

using json = nlohmann::json;

class SessionTest : public DevcoreTest {};

TEST_F(SessionTest, MatchingHelloIsWelcomedWithNewConnectionIdAndStoredEpoch) {
  FakeTransport t1;
  std::string first_connection;
  {
    auto conn = Open(&t1);
    EXPECT_EQ(t1.read_limit, wire::kMaxControlFrameBytes);
    wire::Welcome w = Hello(conn->session(), t1);
    EXPECT_EQ(w.owner_epoch, 1);
    EXPECT_EQ(w.connection_id.size(), 36u);
    EXPECT_FALSE(w.deployment.has_value());  // not generation-managing
    EXPECT_EQ(t1.read_limit, wire::kMaxFrameBytes);
    first_connection = w.connection_id;
    conn->session().OnTransportClosed();
  }
  FakeTransport t2;
  auto conn = Open(&t2);
  wire::Welcome w = Hello(conn->session(), t2);
  EXPECT_NE(w.connection_id, first_connection);
}

TEST_F(SessionTest, NoHelloWithinFifteenSecondsClosesWith4002) {
  FakeTransport t;
  auto conn = Open(&t);
  clock_.Advance(absl::Seconds(15) - absl::Milliseconds(1));
  EXPECT_FALSE(t.closed().has_value());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(t.closed(), wire::kCloseHelloTimeout);
}

TEST_F(SessionTest, PingsBeforeHelloDoNotExtendTheHelloDeadline) {
  FakeTransport t;
  auto conn = Open(&t);
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(5));
    conn->session().OnFrameActivity();
  }
  EXPECT_EQ(t.closed(), wire::kCloseHelloTimeout);
}

TEST_F(SessionTest, ThirtyFiveSecondsWithoutAnyFrameClosesWith4001) {
  FakeTransport t;
  auto conn = Open(&t);
  Hello(conn->session(), t);
  clock_.Advance(absl::Seconds(30));
  conn->session().OnFrameActivity();  // a ping resets the idle timer
  clock_.Advance(absl::Seconds(34));
  EXPECT_FALSE(t.closed().has_value());
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(t.closed(), wire::kCloseIdle);
  EXPECT_EQ(conn->session().state(), Session::State::kClosing);
}

TEST_F(SessionTest, HeartbeatIsAcknowledgedAndItsHealthRecordedNormalized) {
  FakeTransport t;
  auto conn = Open(&t);
  Session& s = conn->session();
  Hello(s, t);
  wire::Heartbeat hb = MakeHeartbeat(s);
  hb.health.provider_ready = false;
  hb.health.diagnostic = "flux_capacitor_missing";  // well-formed, unknown to §7
  s.OnMessage(wire::Encode(hb), true);
  ASSERT_FALSE(t.closed().has_value());
  const wire::Frame f = t.LastFrame();
  const auto* ack = std::get_if<wire::HeartbeatAck>(&f);
  ASSERT_NE(ack, nullptr);
  EXPECT_EQ(ack->connection_id, s.connection_id());
  EXPECT_EQ(ack->owner_epoch, 1);
  const NodeRuntime* rt = devcore_->store().FindRuntime(node_id_);
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(rt->heartbeats, 1);
  json health = json::parse(*rt->last_health_json);
  EXPECT_EQ(health["provider_ready"], false);
  EXPECT_EQ(health["diagnostic"], "provider_unavailable");
  EXPECT_EQ(health["host"]["cpu_cores"], 2);
  EXPECT_EQ(rt->last_seen_at, "2026-11-18T11:06:40Z");  // SimulatedClock's start
}

TEST_F(SessionTest, KnownDiagnosticIsRecordedAsSent) {
  FakeTransport t;
  auto conn = Open(&t);
  Session& s = conn->session();
  Hello(s, t);
  wire::Heartbeat hb = MakeHeartbeat(s);
  hb.health.provider_ready = false;
  hb.health.diagnostic = "daemon_unreachable";
  s.OnMessage(wire::Encode(hb), true);
  json health = json::parse(*devcore_->store().FindRuntime(node_id_)->last_health_json);
  EXPECT_EQ(health["diagnostic"], "daemon_unreachable");
}

TEST_F(SessionTest, HeartbeatWithAnotherConnectionIdClosesWith4006) {
  FakeTransport t;
  auto conn = Open(&t);
  Session& s = conn->session();
  Hello(s, t);
  wire::Heartbeat hb = MakeHeartbeat(s);
  hb.connection_id = "00000000-0000-4000-8000-000000000000";
  s.OnMessage(wire::Encode(hb), true);
  EXPECT_EQ(t.closed(), wire::kCloseCorrelation);
}

TEST_F(SessionTest, HeartbeatWithAnotherOwnerEpochClosesWith4005) {
  FakeTransport t;
  auto conn = Open(&t);
  Session& s = conn->session();
  Hello(s, t);
  wire::Heartbeat hb = MakeHeartbeat(s);
  hb.owner_epoch = 2;
  s.OnMessage(wire::Encode(hb), true);
  EXPECT_EQ(t.closed(), wire::kCloseEpochMismatch);
}

TEST_F(SessionTest, RevokedCredentialClosesAtTheNextHeartbeatWith4004) {
  FakeTransport t;
  auto conn = Open(&t);
  Session& s = conn->session();
  Hello(s, t);
  ASSERT_TRUE(devcore_->store().RevokeCredential(node_id_).ok());
  EXPECT_FALSE(t.closed().has_value());  // nothing happens until the node speaks
  s.OnMessage(wire::Encode(MakeHeartbeat(s)), true);
  EXPECT_EQ(t.closed(), wire::kCloseCredentialRejected);
}

TEST_F(SessionTest, OwnerEpochBumpClosesTheLiveConnectionWith4005AndTheNextWelcomeCarriesIt) {
  FakeTransport t1;
  {
    auto conn = Open(&t1);
    Hello(conn->session(), t1);
    HttpRequest bump;
    bump.method = "POST";
    bump.target = "/admin/v1/nodes/" + node_id_ + "/owner-epoch";
    bump.peer_loopback = true;
    HttpResponse res;
    devcore_->HandleHttp(bump, [&](HttpResponse r) { res = std::move(r); });
    EXPECT_EQ(res.status, 200);
    EXPECT_EQ(json::parse(res.body)["owner_epoch"], 2);
    EXPECT_EQ(t1.closed(), wire::kCloseEpochMismatch);
    conn->session().OnTransportClosed();
  }
  FakeTransport t2;
  auto conn = Open(&t2);
  EXPECT_EQ(Hello(conn->session(), t2).owner_epoch, 2);
}

struct Mismatch {
  const char* name;
  void (*apply)(wire::Hello&);
};

class HelloIdentityTest : public SessionTest,
                          public ::testing::WithParamInterface<Mismatch> {};

TEST_P(HelloIdentityTest, HelloThatDoesNotMatchTheEnrolledNodeClosesWith4003) {
  FakeTransport t;
  auto conn = Open(&t);
  wire::Hello h = MatchingHello();
  GetParam().apply(h);
  conn->session().OnMessage(wire::Encode(h), true);
  EXPECT_EQ(t.closed(), wire::kCloseIdentityMismatch);
  EXPECT_TRUE(t.sent.empty());  // no welcome
}

INSTANTIATE_TEST_SUITE_P(
    EveryIdentityMember, HelloIdentityTest,
    ::testing::Values(
        Mismatch{"node_id", [](wire::Hello& h) { h.node_id = kInstallation; }},
        Mismatch{"installation_id",
                 [](wire::Hello& h) {
                   h.installation_id = "11111111-2222-4333-8444-555555555555";
                 }},
        Mismatch{"provider", [](wire::Hello& h) { h.provider = "microvm"; }},
        Mismatch{"deployment_generation", [](wire::Hello& h) { h.deployment_generation = 2; }},
        Mismatch{"specification_digest",
                 [](wire::Hello& h) { h.specification_digest = kOtherDigest; }},
        Mismatch{"generation_management",
                 [](wire::Hello& h) {
                   h.generation_management = true;
                   h.health.provider_ready.reset();
                 }}),
    [](const ::testing::TestParamInfo<Mismatch>& info) { return std::string(info.param.name); });

TEST_F(SessionTest, BackendFingerprintIsRecordedNotMatched) {
  FakeTransport t;
  auto conn = Open(&t);
  wire::Hello h = MatchingHello();
  h.backend_fingerprint = "docker/25 overlay2";
  conn->session().OnMessage(wire::Encode(h), true);
  EXPECT_TRUE(conn->session().live());
  EXPECT_EQ(devcore_->store().Find(node_id_)->backend_fingerprint, "docker/25 overlay2");
}

TEST_F(SessionTest, InvalidJsonClosesWith1008) {
  FakeTransport t;
  auto conn = Open(&t);
  conn->session().OnMessage("{\"type\":\"hello\",", true);
  EXPECT_EQ(t.closed(), wire::kCloseInvalidFrame);
}

TEST_F(SessionTest, BinaryMessageClosesWith1008) {
  FakeTransport t;
  auto conn = Open(&t);
  conn->session().OnMessage(wire::Encode(MatchingHello()), false);
  EXPECT_EQ(t.closed(), wire::kCloseInvalidFrame);
}

TEST_F(SessionTest, FrameOtherThanHelloBeforeHelloClosesWith1008) {
  FakeTransport t;
  auto conn = Open(&t);
  wire::Heartbeat hb;
  hb.connection_id = "00000000-0000-4000-8000-000000000000";
  hb.owner_epoch = 1;
  hb.health = ReadyHealth();
  conn->session().OnMessage(wire::Encode(hb), true);
  EXPECT_EQ(t.closed(), wire::kCloseInvalidFrame);
}

TEST_F(SessionTest, SecondHelloClosesWith1008) {
  FakeTransport t;
  auto conn = Open(&t);
  Hello(conn->session(), t);
  conn->session().OnMessage(wire::Encode(MatchingHello()), true);
  EXPECT_EQ(t.closed(), wire::kCloseInvalidFrame);
}

TEST_F(SessionTest, FrameWithUnknownMemberClosesWith1008) {
  FakeTransport t;
  auto conn = Open(&t);
  std::string hello = wire::Encode(MatchingHello());
  hello.insert(1, "\"Node_ID\":\"x\",");
  conn->session().OnMessage(hello, true);
  EXPECT_EQ(t.closed(), wire::kCloseInvalidFrame);
}

TEST_F(SessionTest, ControlFrameOverThirtyTwoKibibytesClosesWith1009) {
  FakeTransport t;
  auto conn = Open(&t);
  Session& s = conn->session();
  Hello(s, t);
  wire::Heartbeat hb = MakeHeartbeat(s);
  std::string text = wire::Encode(hb);
  text.insert(text.size() - 1, std::string(wire::kMaxControlFrameBytes, ' '));
  s.OnMessage(text, true);
  EXPECT_EQ(t.closed(), wire::kCloseTooLarge);
}

TEST_F(SessionTest, ResponseToAnUnknownRequestIdClosesWith4006) {
  FakeTransport t;
  auto conn = Open(&t);
  Session& s = conn->session();
  Hello(s, t);
  wire::Response r;
  r.id = "00000000-0000-4000-8000-000000000001";
  r.connection_id = s.connection_id();
  r.error_code = "unavailable";
  s.OnMessage(wire::Encode(r), true);
  EXPECT_EQ(t.closed(), wire::kCloseCorrelation);
}

TEST_F(SessionTest, RetentionFromANodeWithoutGenerationManagementClosesWith4006) {
  FakeTransport t;
  auto conn = Open(&t);
  Session& s = conn->session();
  Hello(s, t);
  wire::Retention r;
  r.id = "00000000-0000-4000-8000-000000000002";
  r.sequence = 1;
  r.connection_id = s.connection_id();
  r.owner_epoch = s.owner_epoch();
  r.entries.push_back({1, kDigest, std::nullopt});
  s.OnMessage(wire::Encode(r), true);
  EXPECT_EQ(t.closed(), wire::kCloseCorrelation);
}

TEST_F(SessionTest, NothingIsSentOrClosedAfterTheTransportClosed) {
  FakeTransport t;
  auto conn = Open(&t);
  Session& s = conn->session();
  Hello(s, t);
  s.OnTransportClosed();
  const size_t sent = t.sent.size();
  s.OnMessage(wire::Encode(MakeHeartbeat(s)), true);
  clock_.Advance(absl::Seconds(100));
  EXPECT_EQ(t.sent.size(), sent);
  EXPECT_FALSE(t.closed().has_value());
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

}  // namespace
}  // namespace sn::devcore::testing

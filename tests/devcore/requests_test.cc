// Provider requests on a live connection (tools/devcore/request_tracker.h, issue #4): ids and
// sequences, the 32-pending bound, the wait, and validation of every response.
#include <deque>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "common/wire/codec.h"
#include "common/wire/limits.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/devcore/fixture.h"

namespace sn::devcore::testing {
namespace {

using json = nlohmann::json;

constexpr char kSandbox[] = "0b7e3c1a-5d2f-4e6a-8b9c-0d1e2f3a4b5c";

class RequestsTest : public DevcoreTest {
 protected:
  void SetUp() override {
    DevcoreTest::SetUp();
    conn_ = Open(&t_);
    Hello(session(), t_);
  }
  Session& session() { return conn_->session(); }

  // Sends a request; the outcome lands in the returned slot when the session delivers it.
  // Slots live as long as the fixture, which outlives the connection.
  std::optional<RequestOutcome>& Send(const std::string& operation, const std::string& arguments,
                                      int64_t timeout_ms = 1000, int64_t generation = 1) {
    std::optional<RequestOutcome>* out = &outcomes_.emplace_back();
    session().SendRequest(AdminRequest{generation, operation, timeout_ms, arguments},
                          [out](RequestOutcome o) { *out = std::move(o); });
    return *out;
  }

  // The request frame the node received last.
  wire::Request LastRequest() {
    const wire::Frame f = t_.LastFrame();
    const auto* r = std::get_if<wire::Request>(&f);
    EXPECT_NE(r, nullptr);
    return r != nullptr ? *r : wire::Request{};
  }

  void Answer(wire::Response r) { session().OnMessage(wire::Encode(r), true); }

  wire::Response ResponseTo(const wire::Request& req) {
    wire::Response r;
    r.id = req.id;
    r.connection_id = req.connection_id;
    return r;
  }

  static std::string InspectArgs() { return json{{"sandbox_id", kSandbox}}.dump(); }

  std::deque<std::optional<RequestOutcome>> outcomes_;
  FakeTransport t_;
  std::unique_ptr<Connection> conn_;
};

TEST_F(RequestsTest, RequestsCarryNewIdsTheConnectionAndConsecutiveSequences) {
  Send("inspect", InspectArgs());
  wire::Request first = LastRequest();
  Send("inspect", InspectArgs());
  wire::Request second = LastRequest();
  EXPECT_EQ(first.sequence, 1);
  EXPECT_EQ(second.sequence, 2);
  EXPECT_NE(first.id, second.id);
  EXPECT_EQ(first.connection_id, session().connection_id());
  EXPECT_EQ(first.owner_epoch, session().owner_epoch());
  EXPECT_EQ(first.operation, wire::Operation::kInspect);
  EXPECT_EQ(session().pending_requests(), 2u);
}

TEST_F(RequestsTest, ValidResponseIsReturnedAsTheNodesFrame) {
  auto& out = Send("inspect", InspectArgs());
  wire::Request req = LastRequest();
  wire::Response r = ResponseTo(req);
  r.result = wire::InspectResult{kSandbox, wire::SandboxState::kAbsent, std::nullopt};
  Answer(r);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->http_status, 200);
  json body = json::parse(out->body);
  EXPECT_EQ(body["id"], req.id);
  EXPECT_EQ(body["result"]["state"], "absent");
  EXPECT_FALSE(body.contains("error_code"));
  EXPECT_FALSE(t_.closed().has_value());
  EXPECT_EQ(session().pending_requests(), 0u);
}

TEST_F(RequestsTest, CoreSideRoundTripIsMeasuredOnTheMonotonicClock) {
  auto& out = Send("inspect", InspectArgs());
  wire::Request req = LastRequest();
  clock_.Advance(absl::Microseconds(1234));
  wire::Response r = ResponseTo(req);
  r.result = wire::InspectResult{kSandbox, wire::SandboxState::kAbsent, std::nullopt};
  Answer(r);
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(out->node_round_trip.has_value());
  EXPECT_EQ(*out->node_round_trip, absl::Microseconds(1234));
}

TEST_F(RequestsTest, NoResultOperationSucceedsWithoutResult) {
  auto& out = Send("kill", InspectArgs());
  Answer(ResponseTo(LastRequest()));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->http_status, 200);
  EXPECT_FALSE(json::parse(out->body).contains("result"));
}

TEST_F(RequestsTest, ResultOfAnotherOperationsShapeClosesWith4006) {
  auto& out = Send("inspect", InspectArgs());
  wire::Response r = ResponseTo(LastRequest());
  r.result = wire::WriteFileResult{12};
  Answer(r);
  EXPECT_EQ(t_.closed(), wire::kCloseCorrelation);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->http_status, 502);
}

TEST_F(RequestsTest, SuccessWithoutTheOperationsResultClosesWith4006) {
  Send("inspect", InspectArgs());
  Answer(ResponseTo(LastRequest()));
  EXPECT_EQ(t_.closed(), wire::kCloseCorrelation);
}

TEST_F(RequestsTest, ResultForANoResultOperationClosesWith4006) {
  Send("kill", InspectArgs());
  wire::Response r = ResponseTo(LastRequest());
  r.result = wire::InspectResult{kSandbox, wire::SandboxState::kAbsent, std::nullopt};
  Answer(r);
  EXPECT_EQ(t_.closed(), wire::kCloseCorrelation);
}

TEST_F(RequestsTest, SecondResponseForOneIdClosesWith4006) {
  Send("kill", InspectArgs());
  wire::Response r = ResponseTo(LastRequest());
  Answer(r);
  EXPECT_FALSE(t_.closed().has_value());
  Answer(r);
  EXPECT_EQ(t_.closed(), wire::kCloseCorrelation);
}

TEST_F(RequestsTest, ResponseNamingAnotherConnectionClosesWith4006) {
  Send("kill", InspectArgs());
  wire::Response r = ResponseTo(LastRequest());
  r.connection_id = "00000000-0000-4000-8000-000000000009";
  Answer(r);
  EXPECT_EQ(t_.closed(), wire::kCloseCorrelation);
}

TEST_F(RequestsTest, ThirtyThirdPendingRequestIsRefusedWithoutSending) {
  for (size_t i = 0; i < wire::kMaxPendingRequests; ++i) Send("inspect", InspectArgs());
  const size_t sent = t_.sent.size();
  auto& refused = Send("inspect", InspectArgs());
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->http_status, 429);
  EXPECT_EQ(t_.sent.size(), sent);
}

TEST_F(RequestsTest, WaitEndsAfterTimeoutPlusMarginButTheRequestStaysPending) {
  auto& out = Send("kill", InspectArgs(), /*timeout_ms=*/2000);
  wire::Request req = LastRequest();
  clock_.Advance(absl::Milliseconds(2000) + RequestTracker::kWaitMargin - absl::Milliseconds(1));
  EXPECT_FALSE(out.has_value());
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->http_status, 504);
  EXPECT_EQ(json::parse(out->body)["id"], req.id);
  EXPECT_EQ(session().pending_requests(), 1u);  // the node still counts it
  Answer(ResponseTo(req));                       // a late answer is accepted and dropped
  EXPECT_FALSE(t_.closed().has_value());
  EXPECT_EQ(session().pending_requests(), 0u);
}

TEST_F(RequestsTest, UnsupportedWithoutEvidenceIsReportedUnconfirmed) {
  auto& out = Send("inspect", InspectArgs());
  wire::Response r = ResponseTo(LastRequest());
  r.error_code = "unsupported";
  Answer(r);
  ASSERT_TRUE(out.has_value());
  json body = json::parse(out->body);
  EXPECT_EQ(body["error_code"], "unconfirmed");
  EXPECT_EQ(body["node_error_code"], "unsupported");
  EXPECT_FALSE(t_.closed().has_value());
}

TEST_F(RequestsTest, UnsupportedThatTheProvidersDeclarationDoesNotMakeIsUnconfirmed) {
  auto& out = Send("inspect", InspectArgs());
  wire::Response r = ResponseTo(LastRequest());
  r.error_code = "unsupported";
  r.unsupported = wire::Unsupported{"inspect", "docker cannot inspect"};  // docker supports it
  Answer(r);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(json::parse(out->body)["error_code"], "unconfirmed");
}

std::string CreateArgs() {
  return json{{"sandbox_id", kSandbox}, {"image", "busybox"}, {"cpu_millis", 250},
              {"memory_bytes", 64 << 20}}
      .dump();
}

TEST_F(RequestsTest, ExactCreateSettledReceiptKeepsFailed) {
  auto& out = Send("create", CreateArgs());
  wire::Request req = LastRequest();
  wire::Response r = ResponseTo(req);
  r.error_code = "failed";
  r.create_settled = wire::CreateSettled{req.id, kSandbox, "abc123", 1, kDigest};
  Answer(r);
  ASSERT_TRUE(out.has_value());
  json body = json::parse(out->body);
  EXPECT_EQ(body["error_code"], "failed");
  EXPECT_EQ(body["info"]["create_settled"]["native_id"], "abc123");
}

TEST_F(RequestsTest, ReceiptOfAnotherRequestOrGenerationIsUnconfirmed) {
  for (int variant = 0; variant < 3; ++variant) {
    auto& out = Send("create", CreateArgs());
    wire::Request req = LastRequest();
    wire::Response r = ResponseTo(req);
    r.error_code = "failed";
    r.create_settled = wire::CreateSettled{req.id, kSandbox, "abc123", 1, kDigest};
    if (variant == 0) r.create_settled->request_id = "00000000-0000-4000-8000-000000000007";
    if (variant == 1) r.create_settled->sandbox_id = "00000000-0000-4000-8000-000000000008";
    if (variant == 2) r.create_settled->specification_digest = kOtherDigest;
    Answer(r);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(json::parse(out->body)["error_code"], "unconfirmed") << variant;
  }
  EXPECT_FALSE(t_.closed().has_value());
}

TEST_F(RequestsTest, ClosingTheConnectionAnswersEveryWaiterWith502AndTheId) {
  auto& out = Send("kill", InspectArgs());
  wire::Request req = LastRequest();
  session().OnTransportClosed();
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->http_status, 502);
  EXPECT_EQ(json::parse(out->body)["id"], req.id);
}

TEST_F(RequestsTest, RequestThatWouldBeAnInvalidFrameIsRefusedAndConsumesNoSequence) {
  // Depth: request(1) > arguments(2) > 7 more levels = 9 > 8.
  json deep = json::object();
  for (int i = 0; i < 7; ++i) deep = json{{"x", deep}};
  const size_t sent = t_.sent.size();
  auto& bad = Send("inspect", deep.dump());
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->http_status, 400);
  EXPECT_EQ(t_.sent.size(), sent);
  Send("inspect", InspectArgs());
  EXPECT_EQ(LastRequest().sequence, 1);
}

TEST_F(RequestsTest, UnknownOperationIsSentForTheNodeToAnswerInvalid) {
  auto& out = Send("teleport", InspectArgs());
  const wire::Frame f = t_.LastFrame();
  const auto* req = std::get_if<wire::Request>(&f);
  ASSERT_NE(req, nullptr);
  EXPECT_TRUE(req->request_error.has_value());
  wire::Response r;
  r.id = req->id;
  r.connection_id = req->connection_id;
  r.error_code = "invalid";
  Answer(r);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(json::parse(out->body)["error_code"], "invalid");
}

TEST_F(RequestsTest, AdminRouteRefusesRequestsForANodeThatIsNotConnected) {
  session().OnTransportClosed();
  conn_.reset();
  HttpRequest req{"POST", "/admin/v1/nodes/" + node_id_ + "/requests",
                  "", R"({"generation":1,"operation":"inspect","timeout_ms":10,"arguments":{}})",
                  true, "", ""};
  HttpResponse res;
  devcore_->HandleHttp(req, [&](HttpResponse r) { res = std::move(r); });
  EXPECT_EQ(res.status, 409);
}

TEST_F(RequestsTest, AdminRouteSendsTheRequestAndAnswersWithTheResponse) {
  HttpRequest req{"POST", "/admin/v1/nodes/" + node_id_ + "/requests", "",
                  json{{"generation", 1}, {"operation", "kill"}, {"timeout_ms", 500},
                       {"arguments", {{"sandbox_id", kSandbox}}}}
                      .dump(),
                  true, "", ""};
  std::optional<HttpResponse> res;
  devcore_->HandleHttp(req, [&](HttpResponse r) { res = std::move(r); });
  EXPECT_FALSE(res.has_value());  // waiting for the node
  wire::Request sent = LastRequest();
  EXPECT_EQ(sent.timeout_ms, 500);
  wire::Response r = ResponseTo(sent);
  r.error_code = "not_found";
  Answer(r);
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["error_code"], "not_found");
}

TEST_F(RequestsTest, AdminRouteRejectsABodyWithUnknownMembers) {
  HttpRequest req{"POST", "/admin/v1/nodes/" + node_id_ + "/requests", "",
                  R"({"generation":1,"operation":"kill","timeout_ms":5,"arguments":{},"x":1})",
                  true, "", ""};
  HttpResponse res;
  devcore_->HandleHttp(req, [&](HttpResponse r) { res = std::move(r); });
  EXPECT_EQ(res.status, 400);
}

// The heavy part of a provider request (parsing and checking its body) runs where the
// offload puts it, off the event loop; the loop sends the frame only in `then`, and in the
// order the requests arrived.
TEST_F(RequestsTest, AdminRouteChecksTheBodyInTheOffloadAndSendsOnTheLoopInArrivalOrder) {
  std::vector<std::function<void()>> works, thens;
  devcore_->SetOffload([&](std::function<void()> work, std::function<void()> then) {
    works.push_back(std::move(work));
    thens.push_back(std::move(then));
  });
  const size_t frames_before = t_.sent.size();
  std::vector<std::optional<HttpResponse>> res(3);
  const std::vector<std::string> bodies = {
      json{{"generation", 1}, {"operation", "kill"}, {"timeout_ms", 500},
           {"arguments", {{"sandbox_id", kSandbox}}}}.dump(),
      R"({"generation":1,"operation":"kill","timeout_ms":5,"arguments":{},"x":1})",
      json{{"generation", 1}, {"operation", "inspect"}, {"timeout_ms", 500},
           {"arguments", {{"sandbox_id", kSandbox}}}}.dump()};
  for (size_t i = 0; i < bodies.size(); ++i) {
    HttpRequest req{"POST", "/admin/v1/nodes/" + node_id_ + "/requests", "", bodies[i],
                    true, "", ""};
    devcore_->HandleHttp(req, [&res, i](HttpResponse r) { res[i] = std::move(r); });
  }
  ASSERT_EQ(works.size(), 3u);
  for (auto& w : works) w();  // "another thread": nothing sent, nothing answered yet
  EXPECT_EQ(t_.sent.size(), frames_before);
  for (const auto& r : res) EXPECT_FALSE(r.has_value());
  for (auto& t : thens) t();
  ASSERT_EQ(t_.sent.size(), frames_before + 2);  // the bad body was answered, never sent
  ASSERT_TRUE(res[1].has_value());
  EXPECT_EQ(res[1]->status, 400);
  EXPECT_FALSE(res[0].has_value());  // waiting for the node
  const wire::Frame first = wire::Decode(t_.sent[frames_before], wire::Role::kNode,
                                         wire::kMaxFrameBytes).value();
  const wire::Frame second = wire::Decode(t_.sent[frames_before + 1], wire::Role::kNode,
                                          wire::kMaxFrameBytes).value();
  ASSERT_TRUE(std::holds_alternative<wire::Request>(first));
  ASSERT_TRUE(std::holds_alternative<wire::Request>(second));
  EXPECT_EQ(std::get<wire::Request>(first).operation_name, "kill");
  EXPECT_EQ(std::get<wire::Request>(second).operation_name, "inspect");
  EXPECT_EQ(std::get<wire::Request>(second).sequence,
            std::get<wire::Request>(first).sequence + 1);
}

}  // namespace
}  // namespace sn::devcore::testing

// devcore's HTTP routes (spec §6 and the admin API) and the connect route's 401/409 rules,
// without sockets.
#include <string>

#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/devcore/fixture.h"
#include "tools/devcore/crypto.h"

namespace sn::devcore::testing {
namespace {

using json = nlohmann::json;

class RoutesTest : public DevcoreTest {
 protected:
  void SetUp() override {
    current_ = 1;
    DevcoreTest::SetUp();
  }

  std::string NewToken() {
    HttpResponse r = Call("POST", "/admin/v1/enrollment-tokens", "{}");
    EXPECT_EQ(r.status, 201);
    return json::parse(r.body)["token"];
  }

  std::string EnrollBody(const std::string& token, const std::string& installation) {
    wire::EnrollRequest e;
    e.enrollment_token = token;
    e.installation_id = installation;
    e.provider = "docker";
    e.backend_fingerprint = "docker/24";
    e.max_active = 4;
    e.max_retained = 8;
    return wire::EncodeEnrollRequest(e);
  }
};

constexpr char kNewInstallation[] = "11111111-2222-4333-8444-555555555555";

TEST_F(RoutesTest, EnrollAnswers201WithTheCurrentGenerationAndAWorkingCredential) {
  HttpResponse r =
      Call("POST", "/api/v1/sandbox-node/enroll", EnrollBody(NewToken(), kNewInstallation));
  ASSERT_EQ(r.status, 201) << r.body;
  auto e = wire::DecodeEnrollResponse(r.body);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->deployment_generation, 1);
  EXPECT_EQ(e->specification_digest, kDigest);
  EXPECT_EQ(e->runtime_source, "dev-1");
  EXPECT_TRUE(devcore_->store().CredentialMatches(e->node_id, e->credential));
}

TEST_F(RoutesTest, EnrollmentTokenIsSingleUse) {
  const std::string token = NewToken();
  EXPECT_EQ(Call("POST", "/api/v1/sandbox-node/enroll", EnrollBody(token, kNewInstallation))
                .status,
            201);
  EXPECT_EQ(Call("POST", "/api/v1/sandbox-node/enroll",
                 EnrollBody(token, "22222222-2222-4333-8444-555555555555"))
                .status,
            401);
}

TEST_F(RoutesTest, UnknownTokenAnswers401) {
  EXPECT_EQ(Call("POST", "/api/v1/sandbox-node/enroll", EnrollBody("nope", kNewInstallation))
                .status,
            401);
}

TEST_F(RoutesTest, EnrolledInstallationAnswers409) {
  EXPECT_EQ(
      Call("POST", "/api/v1/sandbox-node/enroll", EnrollBody(NewToken(), kInstallation)).status,
      409);
}

TEST_F(RoutesTest, EnrollBodyWithUnknownMemberAnswers400) {
  std::string body = EnrollBody(NewToken(), kNewInstallation);
  body.insert(1, "\"extra\":1,");
  EXPECT_EQ(Call("POST", "/api/v1/sandbox-node/enroll", body).status, 400);
}

TEST_F(RoutesTest, ConfigurationServesTheExactBytesOfAnAnnouncedGeneration) {
  HttpResponse r = Call("GET", "/api/v1/sandbox-node/configuration?generation=1", "",
                        "Bearer " + credential_);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kSpec1);
  EXPECT_EQ(Call("GET", "/api/v1/sandbox-node/configuration?generation=2", "",
                 "Bearer " + credential_)
                .status,
            404);
  EXPECT_EQ(Call("GET", "/api/v1/sandbox-node/configuration?generation=1", "",
                 "Bearer " + credential_ + "x")
                .status,
            401);
  EXPECT_EQ(Call("GET", "/api/v1/sandbox-node/configuration?generation=01", "",
                 "Bearer " + credential_)
                .status,
            400);
}

TEST_F(RoutesTest, AdminApiRefusesNonLoopbackPeersWith403) {
  EXPECT_EQ(Call("GET", "/admin/v1/nodes", "", "", /*loopback=*/false).status, 403);
  EXPECT_EQ(Call("POST", "/admin/v1/enrollment-tokens", "{}", "", false).status, 403);
}

TEST_F(RoutesTest, NodeListShowsPresenceConnectionEpochAndHealth) {
  json before = json::parse(Call("GET", "/admin/v1/nodes").body);
  ASSERT_EQ(before["nodes"].size(), 1u);
  EXPECT_EQ(before["nodes"][0]["presence"], "disconnected");
  EXPECT_TRUE(before["nodes"][0]["connection_id"].is_null());
  EXPECT_TRUE(before["nodes"][0]["last_health"].is_null());
  FakeTransport t;
  auto conn = Open(&t);
  // Opening is not yet presence.
  EXPECT_EQ(json::parse(Call("GET", "/admin/v1/nodes").body)["nodes"][0]["presence"],
            "disconnected");
  wire::Welcome w = Hello(conn->session(), t);
  json n = json::parse(Call("GET", "/admin/v1/nodes").body)["nodes"][0];
  EXPECT_EQ(n["node_id"], node_id_);
  EXPECT_EQ(n["presence"], "connected");
  EXPECT_EQ(n["connection_id"], w.connection_id);
  EXPECT_EQ(n["owner_epoch"], 1);
  EXPECT_EQ(n["last_health"]["provider_ready"], true);
  EXPECT_EQ(n["heartbeats"], 0);
  EXPECT_EQ(n["max_active"], 4);
}

TEST_F(RoutesTest, UnknownNodeForOwnerEpochAnswers404) {
  EXPECT_EQ(
      Call("POST", "/admin/v1/nodes/00000000-0000-4000-8000-000000000000/owner-epoch").status,
      404);
}

TEST_F(RoutesTest, ConnectIsRefusedWith401ForEveryRejectedCredential) {
  FakeTransport t;
  auto expect401 = [&](HttpRequest req) {
    auto c = devcore_->OpenConnection(req, &t);
    EXPECT_TRUE(absl::IsUnauthenticated(c.status())) << req.target << " " << c.status();
  };
  expect401(Upgrade(node_id_, credential_ + "0"));               // wrong credential
  expect401(Upgrade("00000000-0000-4000-8000-000000000000", credential_));  // unknown node
  HttpRequest no_header = Upgrade(node_id_, credential_);
  no_header.authorization.clear();
  expect401(no_header);
  HttpRequest basic = Upgrade(node_id_, credential_);
  basic.authorization = "Basic " + credential_;
  expect401(basic);
  HttpRequest no_param = Upgrade(node_id_, credential_);
  no_param.target = "/api/v1/sandbox-node/connect";
  expect401(no_param);
  ASSERT_TRUE(devcore_->store().RevokeCredential(node_id_).ok());
  expect401(Upgrade(node_id_, credential_));  // revoked
}

TEST_F(RoutesTest, SecondConnectionWhileOpeningLiveOrClosingAnswers409) {
  FakeTransport t1, t2;
  auto conn = Open(&t1);
  // Opening (upgrade accepted, no hello yet).
  EXPECT_TRUE(absl::IsAlreadyExists(
      devcore_->OpenConnection(Upgrade(node_id_, credential_), &t2).status()));
  Hello(conn->session(), t1);
  EXPECT_TRUE(absl::IsAlreadyExists(
      devcore_->OpenConnection(Upgrade(node_id_, credential_), &t2).status()));
  // Closing: our close frame is sent, the socket is not gone yet.
  conn->session().CloseWith(4001, "idle");
  EXPECT_TRUE(absl::IsAlreadyExists(
      devcore_->OpenConnection(Upgrade(node_id_, credential_), &t2).status()));
  conn->session().OnTransportClosed();
  conn.reset();  // the transport released the connection
  EXPECT_TRUE(devcore_->OpenConnection(Upgrade(node_id_, credential_), &t2).ok());
}

}  // namespace
}  // namespace sn::devcore::testing

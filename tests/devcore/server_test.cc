// The real Beast server on 127.0.0.1:0, driven by a small synchronous Beast client: HTTP
// enroll, 401/409 on the upgrade, hello -> welcome, heartbeat -> heartbeat_ack, an invalid
// frame -> close 1008. Blocking reads wait for each event; nothing sleeps.
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "common/clock.h"
#include "common/wire/codec.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/devcore/fixture.h"
#include "common/asio_timer_queue.h"
#include "tools/devcore/crypto.h"
#include "tools/devcore/devcore.h"
#include "tools/devcore/server.h"

namespace sn::devcore::testing {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = boost::asio::ip::tcp;
using json = nlohmann::json;


class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    auto store = NodeStore::Open(dir_);
    ASSERT_TRUE(store.ok());
    auto generations = GenerationStore::Open(dir_);
    ASSERT_TRUE(generations.ok());
    ASSERT_TRUE((*generations)->Add(MustParse(kSpec1)).ok());
    ASSERT_TRUE((*generations)->SetCurrent(1).ok());
    digest_ = kDigest;
    devcore_ = std::make_unique<Devcore>(*std::move(store), *std::move(generations),
                                         "", SystemClock::Get(), &timers_);
    auto server = Server::Start(ioc_, devcore_.get(), ServerOptions{"127.0.0.1:0", "", ""});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    port_ = server_->port();
    thread_ = std::thread([this] { ioc_.run(); });
  }

  void TearDown() override {
    if (!thread_.joinable()) return;
    boost::asio::post(ioc_, [this] { server_->Stop(); });
    thread_.join();  // returns once every connection has finished
  }

  tcp::socket Dial() {
    tcp::socket s(client_ioc_);
    s.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port_));
    return s;
  }

  http::response<http::string_body> Http(http::verb verb, const std::string& target,
                                         const std::string& body = "") {
    beast::tcp_stream stream(Dial());
    http::request<http::string_body> req(verb, target, 11);
    req.set(http::field::host, "127.0.0.1");
    req.body() = body;
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(stream, buf, res);
    return res;
  }

  // Enrolls a new installation through the HTTP routes; returns {node_id, credential}.
  std::pair<std::string, std::string> Enroll() {
    auto token = Http(http::verb::post, "/admin/v1/enrollment-tokens", "{}");
    EXPECT_EQ(token.result_int(), 201u);
    wire::EnrollRequest e;
    e.enrollment_token = json::parse(token.body())["token"];
    e.installation_id = kInstallation;
    e.provider = "docker";
    e.backend_fingerprint = "docker/24";
    e.max_active = 4;
    e.max_retained = 8;
    auto res = Http(http::verb::post, "/api/v1/sandbox-node/enroll", wire::EncodeEnrollRequest(e));
    EXPECT_EQ(res.result_int(), 201u) << res.body();
    auto decoded = wire::DecodeEnrollResponse(res.body());
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    return {decoded->node_id, decoded->credential};
  }

  // Opens a WebSocket; returns the HTTP status of the upgrade answer (101 on success).
  unsigned Connect(websocket::stream<tcp::socket>& ws, const std::string& node_id,
                   const std::string& credential) {
    ws.next_layer() = Dial();
    ws.set_option(websocket::stream_base::decorator([credential](websocket::request_type& r) {
      r.set(http::field::authorization, "Bearer " + credential);
    }));
    // The asynchronous handshake hands back the response even when the upgrade is declined.
    websocket::response_type res;
    ws.async_handshake(res, "127.0.0.1", "/api/v1/sandbox-node/connect?node_id=" + node_id,
                       [](beast::error_code) {});
    client_ioc_.restart();
    client_ioc_.run();
    return res.result_int();
  }

  wire::Hello MakeHello(const std::string& node_id) {
    wire::Hello h;
    h.node_id = node_id;
    h.installation_id = kInstallation;
    h.provider = "docker";
    h.backend_fingerprint = "docker/24";
    h.deployment_generation = 1;
    h.specification_digest = digest_;
    h.max_active = 4;
    h.max_retained = 8;
    h.health = ReadyHealth();
    return h;
  }

  wire::Frame Read(websocket::stream<tcp::socket>& ws) {
    beast::flat_buffer buf;
    ws.read(buf);
    EXPECT_TRUE(ws.got_text());
    auto f = wire::Decode(beast::buffers_to_string(buf.data()), wire::Role::kNode);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? *f : wire::Frame{};
  }

  // Connects and completes hello -> welcome; an empty welcome on failure.
  wire::Welcome ConnectLive(websocket::stream<tcp::socket>& ws, const std::string& node_id,
                            const std::string& credential) {
    EXPECT_EQ(Connect(ws, node_id, credential), 101u);
    ws.text(true);
    ws.write(boost::asio::buffer(wire::Encode(MakeHello(node_id))));
    const wire::Frame f = Read(ws);
    const auto* w = std::get_if<wire::Welcome>(&f);
    EXPECT_NE(w, nullptr);
    return w != nullptr ? *w : wire::Welcome{};
  }

  // Reads until the server's close arrives; returns its code.
  int ReadClose(websocket::stream<tcp::socket>& ws) {
    beast::flat_buffer buf;
    beast::error_code ec;
    while (!ec) ws.read(buf, ec);
    EXPECT_EQ(ec, websocket::error::closed) << ec.message();
    return ws.reason().code;
  }

  std::string dir_;
  std::string digest_;
  boost::asio::io_context ioc_{1};
  AsioTimerQueue timers_{ioc_};
  std::unique_ptr<Devcore> devcore_;
  std::unique_ptr<Server> server_;
  uint16_t port_ = 0;
  std::thread thread_;
  boost::asio::io_context client_ioc_;
};

TEST_F(ServerTest, UrlNamesTheBoundLoopbackPort) {
  EXPECT_EQ(server_->url(), "http://127.0.0.1:" + std::to_string(port_));
  EXPECT_NE(port_, 0);
}

TEST_F(ServerTest, UpgradeWithARejectedCredentialAnswers401) {
  auto [node_id, credential] = Enroll();
  websocket::stream<tcp::socket> ws(client_ioc_);
  EXPECT_EQ(Connect(ws, node_id, credential + "0"), 401u);
  websocket::stream<tcp::socket> ws2(client_ioc_);
  EXPECT_EQ(Connect(ws2, "00000000-0000-4000-8000-000000000000", credential), 401u);
}

TEST_F(ServerTest, HelloIsWelcomedHeartbeatAckedAndASecondConnectionRefused) {
  auto [node_id, credential] = Enroll();
  websocket::stream<tcp::socket> ws(client_ioc_);
  ASSERT_EQ(Connect(ws, node_id, credential), 101u);
  // While this connection is open, a second one of the same node is refused.
  websocket::stream<tcp::socket> second(client_ioc_);
  EXPECT_EQ(Connect(second, node_id, credential), 409u);

  ws.text(true);
  ws.write(boost::asio::buffer(wire::Encode(MakeHello(node_id))));
  wire::Frame f = Read(ws);
  const auto* welcome = std::get_if<wire::Welcome>(&f);
  ASSERT_NE(welcome, nullptr);
  EXPECT_EQ(welcome->owner_epoch, 1);

  wire::Heartbeat hb;
  hb.connection_id = welcome->connection_id;
  hb.owner_epoch = welcome->owner_epoch;
  hb.health = ReadyHealth();
  ws.write(boost::asio::buffer(wire::Encode(hb)));
  f = Read(ws);
  const auto* ack = std::get_if<wire::HeartbeatAck>(&f);
  ASSERT_NE(ack, nullptr);
  EXPECT_EQ(ack->connection_id, welcome->connection_id);

  auto nodes = json::parse(Http(http::verb::get, "/admin/v1/nodes").body())["nodes"];
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]["presence"], "connected");
  EXPECT_EQ(nodes[0]["connection_id"], welcome->connection_id);
  EXPECT_EQ(nodes[0]["heartbeats"], 1);

  // An invalid frame (a binary message) closes with 1008.
  ws.binary(true);
  ws.write(boost::asio::buffer(std::string("{}")));
  EXPECT_EQ(ReadClose(ws), 1008);
}

TEST_F(ServerTest, OwnerEpochBumpClosesTheLiveConnectionWith4005) {
  auto [node_id, credential] = Enroll();
  websocket::stream<tcp::socket> ws(client_ioc_);
  const wire::Welcome welcome = ConnectLive(ws, node_id, credential);
  ASSERT_FALSE(welcome.connection_id.empty());
  auto res = Http(http::verb::post, "/admin/v1/nodes/" + node_id + "/owner-epoch");
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(json::parse(res.body())["owner_epoch"], welcome.owner_epoch + 1);
  EXPECT_EQ(ReadClose(ws), 4005);
}

TEST_F(ServerTest, AdminRequestTravelsToTheNodeAndItsResponseBack) {
  auto [node_id, credential] = Enroll();
  websocket::stream<tcp::socket> ws(client_ioc_);
  const wire::Welcome welcome = ConnectLive(ws, node_id, credential);
  ASSERT_FALSE(welcome.connection_id.empty());
  // The admin call is written now and answered once the node responds.
  beast::tcp_stream admin(Dial());
  http::request<http::string_body> req(http::verb::post,
                                       "/admin/v1/nodes/" + node_id + "/requests", 11);
  req.set(http::field::host, "127.0.0.1");
  req.body() = json{{"generation", 1}, {"operation", "inspect"}, {"timeout_ms", 60000},
                    {"arguments", {{"sandbox_id", kInstallation}}}}
                   .dump();
  req.prepare_payload();
  http::write(admin, req);

  wire::Frame f = Read(ws);
  ASSERT_TRUE(std::holds_alternative<wire::Request>(f));
  const wire::Request& sent = std::get<wire::Request>(f);
  EXPECT_EQ(sent.connection_id, welcome.connection_id);
  EXPECT_EQ(sent.sequence, 1);
  wire::Response r;
  r.id = sent.id;
  r.connection_id = sent.connection_id;
  r.result = wire::InspectResult{kInstallation, wire::SandboxState::kRunning,
                                 std::string("native-1")};
  ws.write(boost::asio::buffer(wire::Encode(r)));

  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(admin, buf, res);
  ASSERT_EQ(res.result_int(), 200u) << res.body();
  json body = json::parse(res.body());
  EXPECT_EQ(body["id"], sent.id);
  EXPECT_EQ(body["result"]["native_id"], "native-1");
}

// Beast checks a Content-Length against the parser's body limit while it reads the header; with
// its default (1 MB) no provider request above it reached the route, a 48 MiB write_file none.
TEST_F(ServerTest, AdminRequestAboveOneMebibyteTravelsToTheNode) {
  auto [node_id, credential] = Enroll();
  websocket::stream<tcp::socket> ws(client_ioc_);
  ConnectLive(ws, node_id, credential);
  const std::string content(size_t{2} << 20, 'A');  // base64 of 1.5 MiB
  beast::tcp_stream admin(Dial());
  http::request<http::string_body> req(http::verb::post,
                                       "/admin/v1/nodes/" + node_id + "/requests", 11);
  req.set(http::field::host, "127.0.0.1");
  req.body() = json{{"generation", 1}, {"operation", "write_file"}, {"timeout_ms", 60000},
                    {"arguments", {{"sandbox_id", kInstallation}, {"path", "/data/f"},
                                   {"mode", 384}, {"content", content}}}}
                   .dump();
  ASSERT_GT(req.body().size(), size_t{1} << 20);
  req.prepare_payload();
  http::write(admin, req);

  wire::Frame f = Read(ws);
  ASSERT_TRUE(std::holds_alternative<wire::Request>(f));
  const wire::Request& sent = std::get<wire::Request>(f);
  ASSERT_EQ(sent.operation, wire::Operation::kWriteFile);
  EXPECT_EQ(std::get<wire::WriteFileArgs>(sent.args).content.size(), size_t{3} << 19);
  wire::Response r;
  r.id = sent.id;
  r.connection_id = sent.connection_id;
  r.result = wire::WriteFileResult{int64_t{3} << 19};
  ws.write(boost::asio::buffer(wire::Encode(r)));
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(admin, buf, res);
  EXPECT_EQ(res.result_int(), 200u) << res.body();
}

TEST_F(ServerTest, ABodyAboveItsRoutesLimitAnswers413FromItsHeader) {
  auto status_for = [this](const std::string& target, size_t length) {
    tcp::socket s = Dial();
    const std::string head = "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                             "Content-Length: " + std::to_string(length) + "\r\n\r\n";
    boost::asio::write(s, boost::asio::buffer(head));
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    beast::error_code ec;
    http::read(s, buf, res, ec);
    return res.result_int();
  };
  EXPECT_EQ(status_for("/admin/v1/nodes/x/requests", wire::kMaxFrameBytes + 1), 413u);
  EXPECT_EQ(status_for("/admin/v1/enrollment-tokens", wire::kMaxHttpBodyBytes + 1), 413u);
}

TEST_F(ServerTest, InvalidFirstFrameClosesWith1008) {
  auto [node_id, credential] = Enroll();
  websocket::stream<tcp::socket> ws(client_ioc_);
  ASSERT_EQ(Connect(ws, node_id, credential), 101u);
  ws.text(true);
  ws.write(boost::asio::buffer(std::string("{\"version\":1,\"type\":\"hello\"")));
  EXPECT_EQ(ReadClose(ws), 1008);
}

TEST_F(ServerTest, MessageOverThirtyTwoKibibytesBeforeHelloClosesWith1009) {
  auto [node_id, credential] = Enroll();
  websocket::stream<tcp::socket> ws(client_ioc_);
  ASSERT_EQ(Connect(ws, node_id, credential), 101u);
  ws.text(true);
  beast::error_code ec;
  ws.write(boost::asio::buffer(std::string(wire::kMaxControlFrameBytes + 1, ' ')), ec);
  EXPECT_EQ(ReadClose(ws), 1009);
}

TEST_F(ServerTest, UnknownRouteAnswers404AndConnectWithoutUpgradeAnswers426) {
  EXPECT_EQ(Http(http::verb::get, "/nope").result_int(), 404u);
  EXPECT_EQ(Http(http::verb::get, "/api/v1/sandbox-node/connect?node_id=x").result_int(), 426u);
}

}  // namespace
}  // namespace sn::devcore::testing

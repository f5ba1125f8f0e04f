// The Beast transport against a tiny in-test Beast WebSocket server on 127.0.0.1:0, over ws
// and over wss with certificates made in the test (test_certs.h).
#include "agent/connection/ws_transport.h"

#include <stdlib.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "tests/agent/fakes/test_certs.h"

namespace sn::agent::testing {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

constexpr char kTarget[] = "/api/v1/sandbox-node/connect?node_id=abc";
constexpr char kSecret[] = "s3cret-credential";

struct Recorder final : TransportEvents {
  void OnDialResult(const DialResult& r) override { dial = r; }
  void OnActivity() override { ++activity; }
  void OnMessage(std::string payload, bool text) override {
    messages.push_back(std::move(payload));
    texts.push_back(text);
    activity_at_message.push_back(activity);
  }
  void OnClosed(const CloseInfo& info) override { closed = info; }
  std::optional<DialResult> dial;
  int activity = 0;
  std::vector<std::string> messages;
  std::vector<bool> texts;
  std::vector<int> activity_at_message;
  std::optional<CloseInfo> closed;
};

// One scripted connection on its own thread (synchronous Beast calls).
template <class NextLayer>
class TestServer {
 public:
  using Ws = websocket::stream<NextLayer>;
  using Script = std::function<void(Ws&, http::request<http::string_body>&)>;
  static constexpr bool kTls = !std::is_same_v<NextLayer, tcp::socket>;

  explicit TestServer(Script script, ssl::context* tls = nullptr)
      : acceptor_(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)),
        port_(acceptor_.local_endpoint().port()) {
    thread_ = std::thread([this, script = std::move(script), tls] {
      (void)tls;  // used only by the TLS instantiation
      tcp::socket sock(io_);
      beast::error_code ec;
      acceptor_.accept(sock, ec);
      if (ec) return;
      auto serve = [&](Ws& ws) {
        beast::flat_buffer buf;
        http::request<http::string_body> req;
        http::read(ws.next_layer(), buf, req, ec);
        if (!ec) script(ws, req);
      };
      if constexpr (kTls) {
        Ws ws(std::move(sock), *tls);
        ws.next_layer().handshake(ssl::stream_base::server, ec);
        if (ec) {
          tls_failed_ = true;
          return;
        }
        serve(ws);
      } else {
        Ws ws(std::move(sock));
        serve(ws);
      }
    });
  }
  ~TestServer() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  uint16_t port() const { return port_; }
  bool tls_failed() const { return tls_failed_; }

 private:
  net::io_context io_;
  tcp::acceptor acceptor_;
  uint16_t port_;
  bool tls_failed_ = false;
  std::thread thread_;
};

class WsTransportTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!ca_path_.empty()) unlink(ca_path_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }

  std::unique_ptr<WsTransport> Make(const std::string& origin_text,
                                    std::optional<std::string> ca_pem = std::nullopt) {
    absl::StatusOr<Origin> origin = ParseOrigin(origin_text, true);
    EXPECT_TRUE(origin.ok()) << origin.status();
    WsTarget t;
    t.origin = *origin;
    t.target = kTarget;
    t.credential = kSecret;
    if (ca_pem) {
      char tmpl[] = "/tmp/agent-ws-XXXXXX";
      EXPECT_NE(mkdtemp(tmpl), nullptr);
      dir_ = tmpl;
      ca_path_ = dir_ + "/ca.pem";
      std::ofstream(ca_path_) << *ca_pem;
      t.ca_bundle = ca_path_;
    }
    absl::StatusOr<std::unique_ptr<WsTransport>> tr = WsTransport::Create(io_, std::move(t));
    EXPECT_TRUE(tr.ok()) << tr.status();
    (*tr)->SetEvents(&rec_);
    return *std::move(tr);
  }

  // Runs the client's event loop until `pred` holds (each step waits for the next event).
  void RunUntil(const std::function<bool()>& pred) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!pred() && std::chrono::steady_clock::now() < give_up) {
      if (io_.stopped()) io_.restart();
      io_.run_one_for(std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(pred()) << "event did not happen";
  }

  static std::unique_ptr<ssl::context> ServerTls(const TestPki& pki) {
    auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
    ctx->use_certificate_chain(net::buffer(pki.server_cert_pem));
    ctx->use_private_key(net::buffer(pki.server_key_pem), ssl::context::pem);
    return ctx;
  }

  net::io_context io_;
  Recorder rec_;
  std::string dir_;
  std::string ca_path_;
};

using PlainServer = TestServer<tcp::socket>;
using TlsServer = TestServer<ssl::stream<tcp::socket>>;

TEST_F(WsTransportTest, UpgradeCarriesTheBearerOnlyInItsHeaderAndExchangesText) {
  std::string auth, target, extensions, got;
  PlainServer server([&](PlainServer::Ws& ws, http::request<http::string_body>& req) {
    auth = std::string(req[http::field::authorization]);
    target = std::string(req.target());
    extensions = std::string(req[http::field::sec_websocket_extensions]);
    ws.accept(req);
    beast::flat_buffer buf;
    ws.read(buf);
    got = beast::buffers_to_string(buf.data());
    ws.ping("");
    ws.text(true);
    ws.write(net::buffer(std::string("welcome-text")));
    beast::error_code ec;
    ws.close(websocket::close_reason(4004), ec);  // waits for the client's close reply
  });
  auto tr = Make("http://127.0.0.1:" + std::to_string(server.port()));
  tr->Dial(32768);
  RunUntil([&] { return rec_.dial.has_value(); });
  ASSERT_EQ(rec_.dial->kind, DialResult::Kind::kUpgraded) << rec_.dial->detail;
  tr->Send("hello");
  RunUntil([&] { return rec_.closed.has_value(); });
  server.Join();
  EXPECT_EQ(auth, std::string("Bearer ") + kSecret);
  EXPECT_EQ(target, kTarget);
  EXPECT_EQ(target.find(kSecret), std::string::npos);
  EXPECT_EQ(extensions, "");  // no permessage-deflate offer
  EXPECT_EQ(got, "hello");
  ASSERT_EQ(rec_.messages, std::vector<std::string>{"welcome-text"});
  EXPECT_TRUE(rec_.texts[0]);
  EXPECT_GE(rec_.activity_at_message[0], 2);  // the ping, then the data frame
  EXPECT_TRUE(rec_.closed->peer_close_frame);
  EXPECT_EQ(rec_.closed->peer_code, 4004);
}

TEST_F(WsTransportTest, DeclinedUpgradeReportsTheHttpStatus) {
  PlainServer server([&](PlainServer::Ws& ws, http::request<http::string_body>&) {
    http::response<http::string_body> res{http::status::unauthorized, 11};
    res.prepare_payload();
    http::write(ws.next_layer(), res);
  });
  auto tr = Make("http://127.0.0.1:" + std::to_string(server.port()));
  tr->Dial(32768);
  RunUntil([&] { return rec_.dial.has_value(); });
  EXPECT_EQ(rec_.dial->kind, DialResult::Kind::kHttpStatus);
  EXPECT_EQ(rec_.dial->http_status, 401);
  EXPECT_FALSE(rec_.closed.has_value());
}

TEST_F(WsTransportTest, RefusedTcpConnectionIsATransportError) {
  uint16_t port;
  {
    net::io_context io;
    tcp::acceptor a(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  auto tr = Make("http://127.0.0.1:" + std::to_string(port));
  tr->Dial(32768);
  RunUntil([&] { return rec_.dial.has_value(); });
  EXPECT_EQ(rec_.dial->kind, DialResult::Kind::kTransportError);
}

TEST_F(WsTransportTest, MessageOverTheReadLimitIsRefusedWhileReceivingWith1009) {
  int close_code = -1;
  PlainServer server([&](PlainServer::Ws& ws, http::request<http::string_body>& req) {
    ws.accept(req);
    ws.text(true);
    beast::error_code ec;
    ws.write(net::buffer(std::string(40000, 'x')), ec);
    beast::flat_buffer buf;
    while (!ec) ws.read(buf, ec);
    if (ec == websocket::error::closed) close_code = ws.reason().code;
  });
  auto tr = Make("http://127.0.0.1:" + std::to_string(server.port()));
  tr->Dial(32768);
  RunUntil([&] { return rec_.closed.has_value(); });
  server.Join();
  EXPECT_TRUE(rec_.messages.empty());
  EXPECT_FALSE(rec_.closed->peer_close_frame);
  EXPECT_NE(rec_.closed->detail.find("receive limit"), std::string::npos) << rec_.closed->detail;
  // The client closes with 1009 and drops the connection; the unread rest of the payload can
  // make TCP reset it before the server reads the close frame, so only a received code is
  // checked.
  if (close_code != -1) {
    EXPECT_EQ(close_code, 1009);
  }
}

TEST_F(WsTransportTest, RaisedReadLimitAcceptsLargeMessages) {
  PlainServer server([&](PlainServer::Ws& ws, http::request<http::string_body>& req) {
    ws.accept(req);
    beast::flat_buffer buf;
    ws.read(buf);  // the client's "go" after it raised its limit
    ws.text(true);
    ws.write(net::buffer(std::string(3 << 20, 'y')));
    beast::error_code ec;
    while (!ec) ws.read(buf, ec);
  });
  auto tr = Make("http://127.0.0.1:" + std::to_string(server.port()));
  tr->Dial(32768);
  RunUntil([&] { return rec_.dial.has_value(); });
  tr->SetReadLimit(size_t{72} << 20);
  tr->Send("go");
  RunUntil([&] { return !rec_.messages.empty(); });
  EXPECT_EQ(rec_.messages[0].size(), size_t{3} << 20);
  tr->Close(1000);
  RunUntil([&] { return rec_.closed.has_value(); });
}

TEST_F(WsTransportTest, CloseSendsItsCodeAfterQueuedMessages) {
  std::vector<std::string> got;
  int close_code = -1;
  PlainServer server([&](PlainServer::Ws& ws, http::request<http::string_body>& req) {
    ws.accept(req);
    beast::flat_buffer buf;
    beast::error_code ec;
    for (;;) {
      ws.read(buf, ec);
      if (ec) break;
      got.push_back(beast::buffers_to_string(buf.data()));
      buf.consume(buf.size());
    }
    if (ec == websocket::error::closed) close_code = ws.reason().code;
  });
  auto tr = Make("http://127.0.0.1:" + std::to_string(server.port()));
  tr->Dial(32768);
  RunUntil([&] { return rec_.dial.has_value(); });
  tr->Send("one");
  tr->Send("two");
  tr->Close(4005);
  tr->Send("dropped after close");
  RunUntil([&] { return rec_.closed.has_value(); });
  server.Join();
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(close_code, 4005);
}

TEST_F(WsTransportTest, WssWithTheConfiguredCaBundleConnects) {
  TestPki pki = MakeTestPki();
  auto server_tls = ServerTls(pki);
  std::string got;
  TlsServer server(
      [&](TlsServer::Ws& ws, http::request<http::string_body>& req) {
        ws.accept(req);
        beast::flat_buffer buf;
        ws.read(buf);
        got = beast::buffers_to_string(buf.data());
        ws.close(websocket::close_reason(1000));
        beast::error_code ec;
        while (!ec) ws.read(buf, ec);
      },
      server_tls.get());
  auto tr = Make("https://127.0.0.1:" + std::to_string(server.port()), pki.ca_pem);
  tr->Dial(32768);
  RunUntil([&] { return rec_.dial.has_value(); });
  ASSERT_EQ(rec_.dial->kind, DialResult::Kind::kUpgraded) << rec_.dial->detail;
  tr->Send("over tls");
  RunUntil([&] { return rec_.closed.has_value(); });
  server.Join();
  EXPECT_EQ(got, "over tls");
}

TEST_F(WsTransportTest, CertificateFromAnotherCaIsRefused) {
  TestPki pki = MakeTestPki();
  TestPki other = MakeTestPki();
  auto server_tls = ServerTls(pki);
  TlsServer server([](TlsServer::Ws&, http::request<http::string_body>&) {}, server_tls.get());
  auto tr = Make("https://127.0.0.1:" + std::to_string(server.port()), other.ca_pem);
  tr->Dial(32768);
  RunUntil([&] { return rec_.dial.has_value(); });
  server.Join();
  EXPECT_EQ(rec_.dial->kind, DialResult::Kind::kTransportError);
  EXPECT_NE(rec_.dial->detail.find("certificate verify failed"), std::string::npos)
      << rec_.dial->detail;
  EXPECT_TRUE(server.tls_failed());
}

TEST_F(WsTransportTest, CertificateForAnotherHostIsRefused) {
  TestPki pki = MakeTestPki();  // names only 127.0.0.1
  auto server_tls = ServerTls(pki);
  TlsServer server([](TlsServer::Ws&, http::request<http::string_body>&) {}, server_tls.get());
  // Same address, other name: the certificate does not name "localhost".
  auto tr = Make("https://localhost:" + std::to_string(server.port()), pki.ca_pem);
  tr->Dial(32768);
  RunUntil([&] { return rec_.dial.has_value(); });
  server.Join();
  EXPECT_EQ(rec_.dial->kind, DialResult::Kind::kTransportError);
  EXPECT_NE(rec_.dial->detail.find("certificate verify failed"), std::string::npos)
      << rec_.dial->detail;
}

}  // namespace
}  // namespace sn::agent::testing

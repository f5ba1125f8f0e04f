// The HTTP client's streaming GET and its bounds (http_client.h) against a raw in-test HTTP
// server on 127.0.0.1:0 that writes whatever bytes the test scripts: the body arrives in
// bounded pieces without being accumulated; a cut stream, a sink's refusal and a cancellation
// each end the exchange with the right status.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "agent/connection/cancel_token.h"
#include "agent/connection/http_client.h"
#include "gtest/gtest.h"

namespace sn::agent {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Serves one connection: reads the request head, then runs `script` with the socket.
class RawServer {
 public:
  using Script = std::function<void(tcp::socket&)>;
  explicit RawServer(Script script)
      : acceptor_(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this, script = std::move(script)] {
      tcp::socket sock(io_);
      boost::system::error_code ec;
      acceptor_.accept(sock, ec);
      if (ec) return;
      net::streambuf buf;
      net::read_until(sock, buf, "\r\n\r\n", ec);
      if (ec) return;
      std::string head(net::buffers_begin(buf.data()), net::buffers_end(buf.data()));
      request_head = head.substr(0, head.find("\r\n\r\n"));
      script(sock);
      sock.close(ec);
    });
  }
  ~RawServer() { thread_.join(); }
  Origin origin() const {
    return *ParseOrigin("http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()),
                        true);
  }
  std::string request_head;

 private:
  net::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

void Write(tcp::socket& s, const std::string& bytes) {
  boost::system::error_code ec;
  net::write(s, net::buffer(bytes), ec);
}

struct Collected {
  int status = 0;
  std::optional<uint64_t> length;
  std::string body;
  size_t pieces = 0;
  size_t largest = 0;
};

HttpStreamSink Collect(Collected* c) {
  HttpStreamSink sink;
  sink.on_head = [c](int status, std::optional<uint64_t> length) {
    c->status = status;
    c->length = length;
    return absl::OkStatus();
  };
  sink.on_data = [c](std::string_view bytes) {
    c->body.append(bytes);
    ++c->pieces;
    c->largest = std::max(c->largest, bytes.size());
    return absl::OkStatus();
  };
  return sink;
}

HttpCallSpec Get(const std::string& target) {
  HttpCallSpec spec;
  spec.method = "GET";
  spec.target = target;
  spec.timeout = absl::Seconds(20);
  return spec;
}

TEST(HttpStreamTest, TheBodyArrivesInBoundedPiecesWithItsHead) {
  std::string body(1 << 20, 'b');
  for (size_t i = 0; i < body.size(); i += 4093) body[i] = static_cast<char>(i);
  RawServer server([&](tcp::socket& s) {
    Write(s, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
    for (size_t at = 0; at < body.size(); at += 100000) Write(s, body.substr(at, 100000));
  });
  Collected c;
  absl::Status st = HttpGetStream(server.origin(), std::nullopt, Get("/releases/r/a"),
                                  Collect(&c));
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(c.status, 200);
  EXPECT_EQ(c.length, std::optional<uint64_t>(body.size()));
  EXPECT_EQ(c.body, body);
  EXPECT_GT(c.pieces, 1u);
  EXPECT_LE(c.largest, size_t{256} << 10);
  EXPECT_EQ(server.request_head.rfind("GET /releases/r/a HTTP/1.1\r\n", 0), 0u);
  EXPECT_EQ(server.request_head.find("Authorization"), std::string::npos);
}

// The socket's low-water mark (http_client.cc, SetLowWater) never asks for more than is still
// to come: the last bytes, trickling in small writes from a server that then keeps the
// connection open, arrive at once, not after the idle timeout.
TEST(HttpStreamTest, TheLastBytesOfABodyArriveWithoutWaitingForMore) {
  std::string body(3 << 20, 'c');
  for (size_t i = 0; i < body.size(); i += 7919) body[i] = static_cast<char>(i);
  absl::Notification client_done;
  RawServer server([&](tcp::socket& s) {
    Write(s, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
    const size_t tail = 200 << 10;
    Write(s, body.substr(0, body.size() - tail));
    for (size_t at = body.size() - tail; at < body.size(); at += 1000) {
      Write(s, body.substr(at, 1000));
    }
    client_done.WaitForNotification();  // no FIN: only the byte count ends the body
  });
  Collected c;
  HttpCallSpec spec = Get("/releases/r/a");
  spec.timeout = absl::Seconds(30);
  const absl::Time start = absl::Now();
  absl::Status st = HttpGetStream(server.origin(), std::nullopt, spec, Collect(&c));
  const absl::Duration took = absl::Now() - start;
  client_done.Notify();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(c.body, body);
  EXPECT_LE(c.largest, size_t{256} << 10);
  EXPECT_LT(took, absl::Seconds(25));  // a stall would end only with the idle timeout (30 s)
}

TEST(HttpStreamTest, AChunkedBodyHasNoLengthAndArrivesWhole) {
  RawServer server([](tcp::socket& s) {
    Write(s, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n"
             "0\r\n\r\n");
  });
  Collected c;
  ASSERT_TRUE(HttpGetStream(server.origin(), std::nullopt, Get("/x"), Collect(&c)).ok());
  EXPECT_FALSE(c.length.has_value());
  EXPECT_EQ(c.body, "hello world");
}

TEST(HttpStreamTest, AStreamCutBeforeItsEndIsUnavailable) {
  RawServer server([](tcp::socket& s) {
    Write(s, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
    Write(s, std::string(500, 'x'));
  });
  Collected c;
  absl::Status st = HttpGetStream(server.origin(), std::nullopt, Get("/x"), Collect(&c));
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_EQ(c.body.size(), 500u);
}

TEST(HttpStreamTest, TheSinksRefusalEndsTheExchangeUnchanged) {
  RawServer server([](tcp::socket& s) {
    Write(s, "HTTP/1.1 200 OK\r\nContent-Length: 300000\r\n\r\n");
    Write(s, std::string(300000, 'x'));
  });
  size_t seen = 0;
  HttpStreamSink sink;
  sink.on_head = [](int, std::optional<uint64_t>) { return absl::OkStatus(); };
  sink.on_data = [&](std::string_view b) {
    seen += b.size();
    return seen > 100000 ? absl::DataLossError("too many bytes") : absl::OkStatus();
  };
  absl::Status st = HttpGetStream(server.origin(), std::nullopt, Get("/x"), sink);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_LT(seen, 300000u);
}

TEST(HttpStreamTest, ARefusedHeadNeverReadsTheBody) {
  RawServer server([](tcp::socket& s) {
    Write(s, "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno!");
  });
  bool data = false;
  HttpStreamSink sink;
  sink.on_head = [](int status, std::optional<uint64_t>) {
    return status == 200 ? absl::OkStatus() : absl::NotFoundError("404");
  };
  sink.on_data = [&](std::string_view) {
    data = true;
    return absl::OkStatus();
  };
  EXPECT_TRUE(absl::IsNotFound(HttpGetStream(server.origin(), std::nullopt, Get("/x"), sink)));
  EXPECT_FALSE(data);
}

TEST(HttpStreamTest, CancellationInterruptsAStalledStreamAtOnce) {
  absl::Notification headers_seen, server_may_close;
  RawServer server([&](tcp::socket& s) {
    Write(s, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nabc");
    server_may_close.WaitForNotification();  // stalls: only a cancellation ends the client
  });
  CancelToken token;
  HttpCallSpec spec = Get("/x");
  spec.timeout = absl::Hours(1);
  spec.cancel = &token;
  HttpStreamSink sink;
  sink.on_head = [&](int, std::optional<uint64_t>) {
    headers_seen.Notify();
    return absl::OkStatus();
  };
  sink.on_data = [](std::string_view) { return absl::OkStatus(); };
  absl::Status st;
  std::thread client([&] { st = HttpGetStream(server.origin(), std::nullopt, spec, sink); });
  headers_seen.WaitForNotification();
  token.Cancel();
  client.join();
  server_may_close.Notify();
  EXPECT_TRUE(absl::IsCancelled(st)) << st;
}

TEST(HttpStreamTest, AnAlreadyCancelledTokenSendsNothing) {
  CancelToken token;
  token.Cancel();
  HttpCallSpec spec = Get("/x");
  spec.cancel = &token;
  // Nobody listens: a call that tried to connect would fail as Unavailable, not Cancelled.
  Origin o = *ParseOrigin("http://127.0.0.1:1", true);
  absl::StatusOr<HttpResult> r = HttpCall(o, std::nullopt, spec);
  EXPECT_TRUE(absl::IsCancelled(r.status())) << r.status();
}

TEST(HttpStreamTest, AWholeBodyOverItsLimitIsResourceExhausted) {
  RawServer server([](tcp::socket& s) {
    Write(s, "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n" + std::string(2000, 'x'));
  });
  HttpCallSpec spec = Get("/x");
  spec.max_body_bytes = 1000;
  absl::StatusOr<HttpResult> r = HttpCall(server.origin(), std::nullopt, spec);
  EXPECT_TRUE(absl::IsResourceExhausted(r.status()))
      << r.status() << " " << (r.ok() ? r->status : 0) << " " << (r.ok() ? r->body.size() : 0);
}

TEST(HttpStreamTest, ARangeFromIsSentAsARangeHeaderAndTheContentRangeReachesTheSink) {
  RawServer server([&](tcp::socket& s) {
    Write(s, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 1000-1009/1010\r\n"
             "Content-Length: 10\r\n\r\n0123456789");
  });
  HttpCallSpec spec = Get("/releases/r/a");
  spec.range_from = 1000;
  Collected c;
  HttpStreamSink sink = Collect(&c);
  std::string content_range = "unset";
  sink.on_content_range = [&](std::string_view cr) { content_range = std::string(cr); };
  absl::Status st = HttpGetStream(server.origin(), std::nullopt, spec, sink);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_NE(server.request_head.find("\r\nRange: bytes=1000-"), std::string::npos)
      << server.request_head;
  EXPECT_EQ(content_range, "bytes 1000-1009/1010");
  EXPECT_EQ(c.status, 206);
  EXPECT_EQ(c.body, "0123456789");
}

TEST(HttpStreamTest, WithoutARangeFromNoRangeIsAskedAndAMissingContentRangeIsEmpty) {
  RawServer server([&](tcp::socket& s) {
    Write(s, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc");
  });
  Collected c;
  HttpStreamSink sink = Collect(&c);
  std::string content_range = "unset";
  sink.on_content_range = [&](std::string_view cr) { content_range = std::string(cr); };
  ASSERT_TRUE(HttpGetStream(server.origin(), std::nullopt, Get("/x"), sink).ok());
  EXPECT_EQ(server.request_head.find("Range:"), std::string::npos) << server.request_head;
  EXPECT_EQ(content_range, "");
  EXPECT_EQ(c.body, "abc");
}

}  // namespace
}  // namespace sn::agent

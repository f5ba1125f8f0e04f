// Internal to server.cc: the Beast HTTP and WebSocket sessions, templated over the stream
// (beast::tcp_stream for http, beast::ssl_stream<beast::tcp_stream> for https). Not for other
// includers: it pulls in Beast.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_SERVER_SESSIONS_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_SERVER_SESSIONS_H_

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>

#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "common/wire/limits.h"
#include "tools/devcore/devcore.h"

namespace sn::devcore::internal {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = boost::asio::ip::tcp;

inline constexpr auto kHttpTimeout = std::chrono::seconds(30);
inline constexpr size_t kMaxHttpHeaderBytes = 16 * 1024;

// Something the server can abort at shutdown (closes its socket; handlers then finish).
class Abortable {
 public:
  virtual ~Abortable() = default;
  virtual void Abort() = 0;
};

// Shared by the listener and every session; outlives them through shared_ptr.
struct ServerContext {
  Devcore* devcore = nullptr;
  std::unordered_set<Abortable*> live;
  bool stopped = false;
};

template <class Stream>
tcp::socket& LowestSocket(Stream& s) {
  return beast::get_lowest_layer(s).socket();
}

template <class Stream>
bool PeerIsLoopback(Stream& s) {
  boost::system::error_code ec;
  const auto ep = LowestSocket(s).remote_endpoint(ec);
  if (ec) return false;
  const auto addr = ep.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, addr.to_v6())
        .is_loopback();
  }
  return addr.is_loopback();
}

// Shuts a stream down after its last response: TLS close_notify for ssl streams. `owner`
// keeps the stream alive until the asynchronous TLS shutdown completes.
inline void ShutdownStream(beast::tcp_stream& s, std::shared_ptr<void>) {
  boost::system::error_code ec;
  s.socket().shutdown(tcp::socket::shutdown_send, ec);
}
inline void ShutdownStream(beast::ssl_stream<beast::tcp_stream>& s,
                           std::shared_ptr<void> owner) {
  beast::get_lowest_layer(s).expires_after(std::chrono::seconds(5));
  s.async_shutdown([owner = std::move(owner)](const boost::system::error_code&) {});
}

// A Beast body of a FileBody (devcore.h): `length` bytes from `offset`, read with pread in
// 64 KiB pieces as the serializer asks for them, so memory stays bounded whatever the size.
struct FileRangeBody {
  using value_type = std::shared_ptr<const FileBody>;
  static std::uint64_t size(const value_type& body) { return body ? body->length : 0; }

  class writer {
   public:
    using const_buffers_type = boost::asio::const_buffer;
    template <bool isRequest, class Fields>
    writer(const http::header<isRequest, Fields>&, const value_type& body) : body_(body) {}

    void init(boost::system::error_code& ec) {
      pos_ = body_ ? body_->offset : 0;
      remain_ = body_ ? body_->length : 0;
      ec = {};
    }

    boost::optional<std::pair<const_buffers_type, bool>> get(boost::system::error_code& ec) {
      ec = {};
      if (remain_ == 0) return boost::none;
      if (sent_ >= body_->cut_after) {  // the test-only fault: the connection breaks here
        ec = boost::system::error_code(ECONNRESET, boost::system::system_category());
        return boost::none;
      }
      const size_t want = static_cast<size_t>(std::min<std::uint64_t>(
          std::min<std::uint64_t>(remain_, sizeof buf_), body_->cut_after - sent_));
      ssize_t n;
      do {
        n = pread(body_->fd, buf_, want, static_cast<off_t>(pos_));
      } while (n < 0 && errno == EINTR);
      if (n < 0) {
        ec = boost::system::error_code(errno, boost::system::system_category());
        return boost::none;
      }
      if (n == 0) {  // the file shrank under us: the promised length cannot be sent
        ec = boost::system::error_code(EIO, boost::system::system_category());
        return boost::none;
      }
      pos_ += static_cast<std::uint64_t>(n);
      sent_ += static_cast<std::uint64_t>(n);
      remain_ -= static_cast<std::uint64_t>(n);
      return {{const_buffers_type(buf_, static_cast<size_t>(n)), remain_ > 0}};
    }

   private:
    value_type body_;
    std::uint64_t pos_ = 0;
    std::uint64_t remain_ = 0;
    std::uint64_t sent_ = 0;
    char buf_[64 * 1024];
  };
};

template <class Stream>
class WsSession final : public std::enable_shared_from_this<WsSession<Stream>>,
                        public SessionTransport,
                        public Abortable {
 public:
  WsSession(std::shared_ptr<ServerContext> ctx, Stream&& stream)
      : ctx_(std::move(ctx)), ws_(std::move(stream)) {
    ctx_->live.insert(this);
  }
  ~WsSession() override {
    ctx_->live.erase(this);
    conn_.reset();  // releases the node's slot: the connection is fully closed
  }

  // Authenticates the upgrade (401/409 answered as plain HTTP) and accepts it.
  void Run(http::request<http::string_body> req, HttpRequest hreq) {
    absl::StatusOr<std::unique_ptr<Connection>> conn =
        ctx_->devcore->OpenConnection(hreq, this);
    if (!conn.ok()) {
      Reject(absl::IsAlreadyExists(conn.status()) ? 409 : 401,
             std::string(conn.status().message()), req.version());
      return;
    }
    conn_ = *std::move(conn);
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout timeouts =
        websocket::stream_base::timeout::suggested(beast::role_type::server);
    timeouts.idle_timeout = websocket::stream_base::none();  // the session owns idleness
    ws_.set_option(timeouts);
    ws_.auto_fragment(true);
    ws_.write_buffer_bytes(wire::kMaxWebSocketFragmentBytes);
    ws_.read_message_max(wire::kMaxControlFrameBytes);
    ws_.control_callback([this](websocket::frame_type kind, beast::string_view) {
      if (kind != websocket::frame_type::close && conn_) conn_->session().OnFrameActivity();
    });
    req_ = std::move(req);
    ws_.async_accept(req_, [self = this->shared_from_this()](boost::system::error_code ec) {
      self->OnAccept(ec);
    });
  }

  // SessionTransport.
  void SendText(std::string message) override {
    if (closing_) return;
    outbox_.push_back(std::move(message));
    if (!writing_) DoWrite();
  }
  void Close(int code, std::string_view reason) override {
    if (closing_) return;
    closing_ = true;
    close_reason_ = websocket::close_reason(static_cast<websocket::close_code>(code));
    close_reason_.reason.assign(reason.data(), std::min<size_t>(reason.size(), 120));
    if (!writing_) DoClose();
  }
  void SetReadLimit(size_t bytes) override { ws_.read_message_max(bytes); }

  void Abort() override {
    boost::system::error_code ec;
    LowestSocket(ws_).close(ec);
  }

 private:
  void Reject(int status, std::string_view message, unsigned version) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(status), version);
    res->set(http::field::content_type, "application/json");
    res->body() = JsonError(status, message).body;
    res->keep_alive(false);
    res->prepare_payload();
    http::async_write(ws_.next_layer(), *res,
                      [self = this->shared_from_this(), res](boost::system::error_code,
                                                             std::size_t) {
                        ShutdownStream(self->ws_.next_layer(), self);
                      });
  }

  void OnAccept(boost::system::error_code ec) {
    if (ec) {
      conn_->session().OnTransportClosed();
      return;
    }
    conn_->session().Start();
    DoRead();
  }

  void DoRead() {
    ws_.async_read_some(buffer_, 0,
                        [self = this->shared_from_this()](boost::system::error_code ec,
                                                          std::size_t) { self->OnRead(ec); });
  }

  void OnRead(boost::system::error_code ec) {
    Session& session = conn_->session();
    if (ec) {
      session.OnTransportClosed();
      return;
    }
    session.OnFrameActivity();
    if (ws_.is_message_done()) {
      std::string message = beast::buffers_to_string(buffer_.data());
      buffer_.consume(buffer_.size());
      session.OnMessage(message, ws_.got_text());
    }
    // Once closing, Beast's close operation reads (and discards) until the peer's close.
    if (!closing_) DoRead();
  }

  void DoWrite() {
    writing_ = true;
    ws_.text(true);
    ws_.async_write(boost::asio::buffer(outbox_.front()),
                    [self = this->shared_from_this()](boost::system::error_code ec,
                                                      std::size_t) { self->OnWrite(ec); });
  }

  void OnWrite(boost::system::error_code ec) {
    writing_ = false;
    outbox_.pop_front();
    if (ec) {
      outbox_.clear();
      Abort();
      return;
    }
    if (!outbox_.empty()) {
      DoWrite();
    } else if (closing_) {
      DoClose();
    }
  }

  void DoClose() {
    outbox_.clear();
    ws_.async_close(close_reason_,
                    [self = this->shared_from_this()](boost::system::error_code) {});
  }

  std::shared_ptr<ServerContext> ctx_;
  websocket::stream<Stream> ws_;
  http::request<http::string_body> req_;
  std::unique_ptr<Connection> conn_;
  beast::flat_buffer buffer_;
  std::deque<std::string> outbox_;
  bool writing_ = false;
  bool closing_ = false;
  websocket::close_reason close_reason_;
};

template <class Stream>
class HttpSession final : public std::enable_shared_from_this<HttpSession<Stream>>,
                          public Abortable {
 public:
  HttpSession(std::shared_ptr<ServerContext> ctx, Stream&& stream)
      : ctx_(std::move(ctx)), stream_(std::move(stream)) {
    ctx_->live.insert(this);
  }
  ~HttpSession() override { ctx_->live.erase(this); }

  void Abort() override {
    boost::system::error_code ec;
    LowestSocket(stream_).close(ec);
  }

  // Starts with the TLS handshake for https.
  void Run() {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      DoRead();
    } else {
      beast::get_lowest_layer(stream_).expires_after(kHttpTimeout);
      stream_.async_handshake(boost::asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](boost::system::error_code ec) {
                                if (!ec) self->DoRead();
                              });
    }
  }

 private:
  void DoRead() {
    parser_.emplace();
    parser_->header_limit(kMaxHttpHeaderBytes);
    // Beast refuses a Content-Length above the body limit while it parses the header, so the
    // header is read under the largest limit of any route; OnHeader applies the route's own.
    // (With Beast's default, 1 MB, no provider request above it ever reached the route.)
    parser_->body_limit(Devcore::kMaxAnyBodyBytes);
    beast::get_lowest_layer(stream_).expires_after(kHttpTimeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](boost::system::error_code ec, std::size_t) {
          self->OnHeader(ec);
        });
  }

  void OnHeader(boost::system::error_code ec) {
    if (ec) return OnRead(ec);
    const auto target = parser_->get().target();
    const size_t limit = Devcore::MaxBodyBytes(std::string_view(target.data(), target.size()));
    if (const auto length = parser_->content_length(); length.has_value() && *length > limit) {
      return OnRead(http::error::body_limit);
    }
    parser_->body_limit(limit);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](boost::system::error_code ec2,
                                                       std::size_t) { self->OnRead(ec2); });
  }

  void OnRead(boost::system::error_code ec) {
    if (ec == http::error::end_of_stream) {
      ShutdownStream(stream_, this->shared_from_this());
      return;
    }
    if (ec == http::error::body_limit) {
      Write(JsonError(413, "body too large"), false, 11);
      return;
    }
    if (ec) return;
    http::request<http::string_body> req = parser_->release();
    HttpRequest hreq;
    hreq.method = std::string(req.method_string());
    hreq.target = std::string(req.target());
    hreq.authorization = std::string(req[http::field::authorization]);
    hreq.body = req.body();
    hreq.peer_loopback = PeerIsLoopback(stream_);
    hreq.range = std::string(req[http::field::range]);
    hreq.if_range = std::string(req[http::field::if_range]);
    if (websocket::is_upgrade(req) && Devcore::IsConnectTarget(hreq.target)) {
      auto ws = std::make_shared<WsSession<Stream>>(ctx_, std::move(stream_));
      ws->Run(std::move(req), std::move(hreq));
      return;  // this session ends; the stream now belongs to the WebSocket
    }
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();
    ctx_->devcore->HandleHttp(
        hreq, [self = this->shared_from_this(), keep_alive, version](HttpResponse r) {
          self->Write(std::move(r), keep_alive, version);
        });
  }

  void Write(HttpResponse r, bool keep_alive, unsigned version) {
    if (r.file) return WriteFile(std::move(r), keep_alive, version);
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), version);
    res->set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) res->set(name, value);
    res->body() = std::move(r.body);
    res->keep_alive(keep_alive && !ctx_->stopped);
    res->prepare_payload();
    // The answer may come long after the read (a provider request waits for the node).
    beast::get_lowest_layer(stream_).expires_after(kHttpTimeout);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res](boost::system::error_code ec,
                                                             std::size_t) {
                        if (ec) return;
                        if (res->keep_alive()) {
                          self->DoRead();
                        } else {
                          ShutdownStream(self->stream_, self);
                        }
                      });
  }

  // A file body is written piece by piece: each piece renews the timeout, so a slow but
  // moving download of a large artifact is not cut at kHttpTimeout, a stalled one is.
  void WriteFile(HttpResponse r, bool keep_alive, unsigned version) {
    auto res = std::make_shared<http::response<FileRangeBody>>(
        static_cast<http::status>(r.status), version);
    res->set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) res->set(name, value);
    res->body() = std::move(r.file);
    res->keep_alive(keep_alive && !ctx_->stopped);
    res->prepare_payload();
    auto sr = std::make_shared<http::response_serializer<FileRangeBody>>(*res);
    WriteFilePiece(std::move(res), std::move(sr));
  }

  void WriteFilePiece(std::shared_ptr<http::response<FileRangeBody>> res,
                      std::shared_ptr<http::response_serializer<FileRangeBody>> sr) {
    beast::get_lowest_layer(stream_).expires_after(kHttpTimeout);
    http::async_write_some(
        stream_, *sr,
        [self = this->shared_from_this(), res, sr](boost::system::error_code ec, std::size_t) {
          if (ec) {
            self->Abort();  // the promised length can no longer be delivered
            return;
          }
          if (!sr->is_done()) return self->WriteFilePiece(res, sr);
          if (res->keep_alive()) {
            self->DoRead();
          } else {
            ShutdownStream(self->stream_, self);
          }
        });
  }

  std::shared_ptr<ServerContext> ctx_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
};

}  // namespace sn::devcore::internal

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_SERVER_SESSIONS_H_

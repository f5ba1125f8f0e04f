#include "agent/connection/ws_transport.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <deque>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/connection/tls.h"
#include "common/log.h"
#include "common/wire/limits.h"

namespace sn::agent {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

constexpr size_t kReadChunkBytes = 64 * 1024;

std::chrono::nanoseconds ToChrono(absl::Duration d) {
  return std::chrono::nanoseconds(absl::ToInt64Nanoseconds(d));
}

// Shared between the transport and its sessions: only the current session reports events,
// and none does once the transport is gone.
struct Hub {
  TransportEvents* events = nullptr;
  uint64_t current = 0;
};

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void Start() = 0;
  virtual void Send(std::string text) = 0;
  virtual void Close(int code) = 0;
  virtual void SetReadLimit(size_t bytes) = 0;
};

template <class NextLayer>
class Session final : public SessionBase,
                      public std::enable_shared_from_this<Session<NextLayer>> {
  static constexpr bool kTls = !std::is_same_v<NextLayer, beast::tcp_stream>;

 public:
  template <class... StreamArgs>
  Session(net::io_context& io, std::shared_ptr<Hub> hub, uint64_t id, WsTarget target,
          std::shared_ptr<ssl::context> tls, size_t read_limit, StreamArgs&&... stream_args)
      : hub_(std::move(hub)),
        id_(id),
        target_(std::move(target)),
        tls_(std::move(tls)),
        read_limit_(read_limit),
        resolver_(io),
        resolve_timer_(io),
        ws_(std::forward<StreamArgs>(stream_args)...) {}

  void Start() override {
    auto self = this->shared_from_this();
    // The resolver has no timeout of its own: bound it with the dial timeout.
    resolve_timer_.expires_after(ToChrono(target_.dial_timeout));
    resolve_timer_.async_wait([self](const beast::error_code& ec) {
      if (!ec) self->resolver_.cancel();
    });
    resolver_.async_resolve(
        target_.origin.host, std::to_string(target_.origin.port),
        [self](const beast::error_code& ec, const tcp::resolver::results_type& results) {
          self->OnResolve(ec, results);
        });
  }

  void Send(std::string text) override {
    if (!upgraded_ || closing_ || ended_) return;
    queue_.push_back(std::move(text));
    if (!writing_) DoWrite();
  }

  void Close(int code) override {
    if (!upgraded_ || closing_ || ended_) return;
    closing_ = true;
    close_code_ = code;
    if (writing_) {
      close_after_writes_ = true;  // queued messages go first
    } else {
      DoClose();
    }
  }

  void SetReadLimit(size_t bytes) override { ws_.read_message_max(bytes); }

 private:
  bool Current() const { return hub_->events != nullptr && hub_->current == id_; }

  void FailDial(std::string detail) {
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    if (Current()) {
      hub_->events->OnDialResult({DialResult::Kind::kTransportError, 0, std::move(detail)});
    }
  }

  void OnResolve(const beast::error_code& ec, const tcp::resolver::results_type& results) {
    resolve_timer_.cancel();
    if (ec) {
      FailDial(absl::StrCat("cannot resolve ", target_.origin.host, ": ", ec.message()));
      return;
    }
    beast::get_lowest_layer(ws_).expires_after(ToChrono(target_.dial_timeout));
    auto self = this->shared_from_this();
    beast::get_lowest_layer(ws_).async_connect(
        results, [self](const beast::error_code& ec, const tcp::endpoint&) {
          self->OnConnect(ec);
        });
  }

  void OnConnect(const beast::error_code& ec) {
    if (ec) {
      FailDial(absl::StrCat("cannot connect to ", target_.origin.HostHeader(), ": ",
                            ec.message()));
      return;
    }
    if constexpr (kTls) {
      absl::Status st =
          ConfigurePeerVerification(ws_.next_layer().native_handle(), target_.origin.host);
      if (!st.ok()) {
        FailDial(std::string(st.message()));
        return;
      }
      auto self = this->shared_from_this();
      ws_.next_layer().async_handshake(ssl::stream_base::client,
                                       [self](const beast::error_code& ec) {
                                         self->OnTlsHandshake(ec);
                                       });
    } else {
      DoUpgrade();
    }
  }

  void OnTlsHandshake(const beast::error_code& ec) {
    if (ec) {
      SSL* ssl_handle = nullptr;
      if constexpr (kTls) ssl_handle = ws_.next_layer().native_handle();
      FailDial(DescribeTlsFailure("TLS handshake with Core failed", ec.message(), ssl_handle));
      return;
    }
    DoUpgrade();
  }

  void DoUpgrade() {
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout to{};
    to.handshake_timeout = ToChrono(target_.handshake_timeout);
    to.idle_timeout = websocket::stream_base::none();  // the Connection owns the idle rule
    to.keep_alive_pings = false;
    ws_.set_option(to);
    websocket::permessage_deflate pmd;
    pmd.client_enable = false;
    pmd.server_enable = false;
    ws_.set_option(pmd);
    ws_.set_option(websocket::stream_base::decorator(
        [credential = target_.credential](websocket::request_type& req) {
          req.set(http::field::authorization, "Bearer " + credential);
          req.set(http::field::user_agent, "sandbox-node-agent");
        }));
    ws_.read_message_max(read_limit_);
    ws_.auto_fragment(true);
    ws_.write_buffer_bytes(wire::kMaxWebSocketFragmentBytes);
    // Every control frame (ping, pong, close) counts as activity. `this` is safe: the
    // callback only runs inside operations of ws_, which this session owns.
    ws_.control_callback([this](websocket::frame_type, beast::string_view) { Activity(); });
    auto self = this->shared_from_this();
    ws_.async_handshake(res_, target_.origin.HostHeader(), target_.target,
                        [self](const beast::error_code& ec) { self->OnUpgrade(ec); });
  }

  void OnUpgrade(const beast::error_code& ec) {
    if (ec == websocket::error::upgrade_declined) {
      const int status = static_cast<int>(res_.result_int());
      beast::error_code ignored;
      beast::get_lowest_layer(ws_).socket().close(ignored);
      if (Current()) {
        hub_->events->OnDialResult(
            {DialResult::Kind::kHttpStatus, status, absl::StrCat("HTTP ", status)});
      }
      return;
    }
    if (ec) {
      FailDial(absl::StrCat("WebSocket upgrade failed: ", ec.message()));
      return;
    }
    upgraded_ = true;
    if (Current()) hub_->events->OnDialResult({DialResult::Kind::kUpgraded, 101, ""});
    DoRead();
  }

  void Activity() {
    if (Current()) hub_->events->OnActivity();
  }

  void DoRead() {
    auto self = this->shared_from_this();
    ws_.async_read_some(buffer_, kReadChunkBytes,
                        [self](const beast::error_code& ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(const beast::error_code& ec) {
    if (ec) {
      ReadEnded(ec);
      return;
    }
    Activity();
    if (ws_.is_message_done()) {
      std::string payload = beast::buffers_to_string(buffer_.data());
      buffer_.consume(buffer_.size());
      const bool text = ws_.got_text();
      if (Current()) hub_->events->OnMessage(std::move(payload), text);
    }
    DoRead();
  }

  void ReadEnded(const beast::error_code& ec) {
    ended_ = true;
    queue_.clear();
    CloseInfo info;
    if (ec == websocket::error::closed) {
      info.peer_close_frame = true;
      info.peer_code = static_cast<int>(ws_.reason().code);
      info.detail = "close handshake finished";
    } else if (ec == websocket::error::message_too_big) {
      info.detail = "a message exceeded the receive limit (closed with 1009)";
    } else {
      info.detail = ec.message();
    }
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    if (Current()) hub_->events->OnClosed(info);
  }

  void DoWrite() {
    writing_ = true;
    ws_.text(true);
    auto self = this->shared_from_this();
    ws_.async_write(net::buffer(queue_.front()),
                    [self](const beast::error_code& ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(const beast::error_code& ec) {
    writing_ = false;
    if (ec) {
      queue_.clear();
      beast::error_code ignored;
      beast::get_lowest_layer(ws_).socket().close(ignored);  // the read ends and reports
      return;
    }
    if (!queue_.empty()) queue_.pop_front();
    if (ended_) return;
    if (!queue_.empty()) {
      DoWrite();
    } else if (close_after_writes_) {
      close_after_writes_ = false;
      DoClose();
    }
  }

  void DoClose() {
    auto self = this->shared_from_this();
    ws_.async_close(websocket::close_reason(static_cast<uint16_t>(close_code_)),
                    [self](const beast::error_code& ec) {
                      if (ec) {
                        beast::error_code ignored;
                        beast::get_lowest_layer(self->ws_).socket().close(ignored);
                      }
                    });
  }

  std::shared_ptr<Hub> hub_;
  uint64_t id_;
  WsTarget target_;
  std::shared_ptr<ssl::context> tls_;  // outlives ws_ (declared before it)
  size_t read_limit_;
  tcp::resolver resolver_;
  net::steady_timer resolve_timer_;
  websocket::stream<NextLayer> ws_;
  websocket::response_type res_;
  beast::flat_buffer buffer_;
  std::deque<std::string> queue_;
  bool upgraded_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool close_after_writes_ = false;
  bool ended_ = false;
  int close_code_ = 1000;
};

}  // namespace

class WsTransport::Impl {
 public:
  Impl(net::io_context& io, WsTarget target, std::shared_ptr<ssl::context> tls)
      : io_(io), target_(std::move(target)), tls_(std::move(tls)) {}
  ~Impl() { hub_->events = nullptr; }

  void SetEvents(TransportEvents* events) { hub_->events = events; }

  void Dial(size_t read_limit) {
    const uint64_t id = ++hub_->current;
    if (target_.origin.tls) {
      session_ = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
          io_, hub_, id, target_, tls_, read_limit, io_, *tls_);
    } else {
      LogWarning(
          "connecting to Core over plain http (insecure_allow_http): the connection is not "
          "encrypted or authenticated; development only",
          {{"core_origin", target_.origin.text}});
      session_ = std::make_shared<Session<beast::tcp_stream>>(io_, hub_, id, target_, nullptr,
                                                              read_limit, io_);
    }
    session_->Start();
  }

  void SetReadLimit(size_t bytes) {
    if (session_) session_->SetReadLimit(bytes);
  }
  void Send(std::string text) {
    if (session_) session_->Send(std::move(text));
  }
  void Close(int code) {
    if (session_) session_->Close(code);
  }

 private:
  net::io_context& io_;
  WsTarget target_;
  std::shared_ptr<ssl::context> tls_;
  std::shared_ptr<Hub> hub_ = std::make_shared<Hub>();
  std::shared_ptr<SessionBase> session_;
};

absl::StatusOr<std::unique_ptr<WsTransport>> WsTransport::Create(net::io_context& io,
                                                                 WsTarget target) {
  std::shared_ptr<ssl::context> tls;
  if (target.origin.tls) {
    absl::StatusOr<std::shared_ptr<ssl::context>> ctx = MakeClientTlsContext(target.ca_bundle);
    if (!ctx.ok()) return ctx.status();
    tls = *std::move(ctx);
  }
  return std::unique_ptr<WsTransport>(
      new WsTransport(std::make_unique<Impl>(io, std::move(target), std::move(tls))));
}

WsTransport::WsTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WsTransport::~WsTransport() = default;

void WsTransport::SetEvents(TransportEvents* events) { impl_->SetEvents(events); }
void WsTransport::Dial(size_t read_limit) { impl_->Dial(read_limit); }
void WsTransport::SetReadLimit(size_t bytes) { impl_->SetReadLimit(bytes); }
void WsTransport::Send(std::string text) { impl_->Send(std::move(text)); }
void WsTransport::Close(int code) { impl_->Close(code); }

}  // namespace sn::agent

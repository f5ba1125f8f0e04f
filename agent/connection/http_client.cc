#include "agent/connection/http_client.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/connection/tls.h"
#include "common/log.h"

namespace sn::agent {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

// A streamed body is handed on in pieces of this size (the last may be shorter): one handler
// and one idle-timer re-arm per piece, not per socket read (Beast reads at most 64 KiB at a
// time into the piece); the size of the agent's PutArtifact messages, so a piece is one message.
constexpr size_t kStreamPieceBytes = 256 << 10;
constexpr uint64_t kLowWaterMargin = 64 << 10;
// Beast's largest socket read (http::read_some asks for at most 64 KiB of buffer space).
constexpr size_t kSocketReadBytes = 64 << 10;

// One exchange on a fresh connection: resolve, connect, TLS, write, then either read the whole
// response (HttpCall) or stream its body into a sink (HttpGetStream).
template <class Stream>
class Call : public std::enable_shared_from_this<Call<Stream>> {
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

 public:
  template <class... StreamArgs>
  Call(net::io_context& io, const Origin& origin, const HttpCallSpec& spec,
       const HttpStreamSink* sink, StreamArgs&&... stream_args)
      : origin_(origin),
        spec_(spec),
        sink_(sink),
        resolver_(io),
        stream_(std::forward<StreamArgs>(stream_args)...) {}

  void Start() {
    auto self = this->shared_from_this();
    Expire();
    resolver_.async_resolve(origin_.host, std::to_string(origin_.port),
                            [self](const beast::error_code& ec,
                                   const tcp::resolver::results_type& results) {
                              if (ec) {
                                return self->Fail(absl::StrCat("cannot resolve ", self->origin_.host,
                                                               ": ", ec.message()));
                              }
                              self->Connect(results);
                            });
  }

  // After a cancellation stopped the io_context: abort what is outstanding so that the
  // handlers complete (with errors) when the context runs again.
  void Abort() {
    resolver_.cancel();
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
  }

  absl::StatusOr<HttpResult> result() const { return result_; }
  absl::Status stream_status() const { return stream_status_; }

 private:
  // HttpCall: one expiry for the whole exchange; a stream: an idle timeout per operation.
  void Expire() {
    beast::get_lowest_layer(stream_).expires_after(
        std::chrono::nanoseconds(absl::ToInt64Nanoseconds(spec_.timeout)));
  }
  void Rearm() {
    if (sink_ != nullptr) Expire();
  }

  void Fail(std::string why) { Finish(absl::UnavailableError(std::move(why))); }
  void Finish(absl::Status st) {
    stream_status_ = st;
    result_ = std::move(st);
    Abort();
  }

  void Connect(const tcp::resolver::results_type& results) {
    auto self = this->shared_from_this();
    Rearm();
    beast::get_lowest_layer(stream_).async_connect(
        results, [self](const beast::error_code& ec, const tcp::endpoint&) {
          if (ec) {
            return self->Fail(absl::StrCat("cannot connect to ", self->origin_.HostHeader(), ": ",
                                           ec.message()));
          }
          self->Handshake();
        });
  }

  void Handshake() {
    if constexpr (kTls) {
      absl::Status st = ConfigurePeerVerification(stream_.native_handle(), origin_.host);
      if (!st.ok()) return Fail(std::string(st.message()));
      auto self = this->shared_from_this();
      Rearm();
      stream_.async_handshake(ssl::stream_base::client, [self](const beast::error_code& ec) {
        if (ec) {
          return self->Fail(DescribeTlsFailure("TLS handshake with Core failed", ec.message(),
                                               self->stream_.native_handle()));
        }
        self->Write();
      });
    } else {
      Write();
    }
  }

  void Write() {
    req_.method_string(spec_.method);
    req_.target(spec_.target);
    req_.version(11);
    req_.set(http::field::host, origin_.HostHeader());
    req_.set(http::field::user_agent, "sandbox-node-agent");
    req_.set(http::field::connection, "close");
    if (spec_.bearer.has_value()) req_.set(http::field::authorization, "Bearer " + *spec_.bearer);
    if (spec_.range_from.has_value()) {
      req_.set(http::field::range, absl::StrCat("bytes=", *spec_.range_from, "-"));
    }
    if (!spec_.body.empty()) req_.set(http::field::content_type, "application/json");
    req_.body() = spec_.body;
    req_.prepare_payload();
    auto self = this->shared_from_this();
    Rearm();
    http::async_write(stream_, req_, [self](const beast::error_code& ec, size_t) {
      if (ec) return self->Fail(absl::StrCat("cannot send the request: ", ec.message()));
      if (self->sink_ != nullptr) {
        self->ReadHead();
      } else {
        self->Read();
      }
    });
  }

  // The whole response, at most max_body_bytes of body. The Content-Length is checked here
  // against the limit: Boost 1.74's parser does not enforce body_limit against a
  // Content-Length when the body arrives in the same read as the header.
  void Read() {
    parser_.body_limit(spec_.max_body_bytes);
    auto self = this->shared_from_this();
    http::async_read_header(stream_, buffer_, parser_, [self](const beast::error_code& ec,
                                                              size_t) {
      if (ec == http::error::body_limit) return self->TooLarge();
      if (ec) return self->Fail(absl::StrCat("cannot read the response: ", ec.message()));
      if (self->parser_.content_length().has_value() &&
          *self->parser_.content_length() > self->spec_.max_body_bytes) {
        return self->TooLarge();
      }
      self->ReadRest();
    });
  }

  void ReadRest() {
    auto self = this->shared_from_this();
    http::async_read(stream_, buffer_, parser_, [self](const beast::error_code& ec, size_t) {
      if (ec == http::error::body_limit) return self->TooLarge();
      if (ec) return self->Fail(absl::StrCat("cannot read the response: ", ec.message()));
      HttpResult r;
      r.status = static_cast<int>(self->parser_.get().result_int());
      r.body = std::move(self->parser_.get().body());
      self->result_ = std::move(r);
      self->stream_status_ = absl::OkStatus();
      self->Close();
    });
  }

  void TooLarge() {
    Finish(absl::ResourceExhaustedError(
        absl::StrCat("the response body exceeds ", spec_.max_body_bytes, " bytes")));
  }

  void ReadHead() {
    // The sink bounds the body. (Not boost::none: Boost 1.74 compares a Content-Length with
    // an empty optional as "larger" and fails every response that has one.)
    stream_parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
    auto self = this->shared_from_this();
    Rearm();
    http::async_read_header(stream_, buffer_, stream_parser_,
                            [self](const beast::error_code& ec, size_t) {
                              if (ec) {
                                return self->Fail(
                                    absl::StrCat("cannot read the response: ", ec.message()));
                              }
                              std::optional<uint64_t> length;
                              if (self->stream_parser_.content_length().has_value()) {
                                length = *self->stream_parser_.content_length();
                              }
                              if (self->sink_->on_content_range) {
                                const auto& head = self->stream_parser_.get();
                                auto it = head.find(http::field::content_range);
                                self->sink_->on_content_range(
                                    it == head.end()
                                        ? std::string_view()
                                        : std::string_view(it->value().data(),
                                                           it->value().size()));
                              }
                              absl::Status st = self->sink_->on_head(
                                  static_cast<int>(self->stream_parser_.get().result_int()),
                                  length);
                              if (!st.ok()) return self->Finish(std::move(st));
                              // Beast reads into the free space of buffer_, at least 512 bytes,
                              // at most 64 KiB: left at the few KiB the head needed, every
                              // socket read of the body would be that small (profiled: 512-byte
                              // recvmsg calls, ~130,000 for a 66 MiB artifact).
                              self->buffer_.reserve(kSocketReadBytes);
                              self->ReadBody();
                            });
  }

  void ReadBody() {
    if (stream_parser_.is_done()) {
      stream_status_ = absl::OkStatus();
      Close();
      return;
    }
    stream_parser_.get().body().data = piece_.get();
    stream_parser_.get().body().size = kStreamPieceBytes;
    SetLowWater();
    auto self = this->shared_from_this();
    Rearm();
    http::async_read(stream_, buffer_, stream_parser_,
                     [self](beast::error_code ec, size_t) {
                       if (ec == http::error::need_buffer) ec = {};
                       // What arrived is handed on first, also when the stream broke after it.
                       const size_t n =
                           kStreamPieceBytes - self->stream_parser_.get().body().size;
                       if (n > 0) {
                         self->handed_ += n;
                         absl::Status st =
                             self->sink_->on_data(std::string_view(self->piece_.get(), n));
                         if (!st.ok()) return self->Finish(std::move(st));
                       }
                       if (ec) {
                         return self->Fail(absl::StrCat("the response body was cut short: ",
                                                        ec.message()));
                       }
                       self->ReadBody();
                     });
  }

  // The socket wakes the reader only once a good part of a piece has arrived (SO_RCVLOWAT,
  // which also makes the kernel offer Core a window that large), instead of once per segment
  // the sender's pacing produced: profiled, the agent spent most of its stream CPU in one
  // wake-up, recvmsg and timer re-arm per few KiB (docs/performance.md, "Preparation"). Never
  // more than is still to come: the mark stays kLowWaterMargin below the body bytes not yet
  // read off the socket (Beast's buffer, and with TLS the records the stream buffered, hold
  // less than that), so the last bytes never wait. For a body of unknown length the default
  // (1) stays. The idle timeout then means "less than a mark arrived in `timeout`"; a mark is
  // at most 256 KiB, far below what a preparation's deadline needs anyway.
  void SetLowWater() {
    if (!stream_parser_.content_length().has_value()) return;
    const uint64_t length = *stream_parser_.content_length();
    const uint64_t read = handed_ + buffer_.size();
    const uint64_t unread = length > read ? length - read : 0;
    const uint64_t mark =
        unread > kLowWaterMargin ? std::min<uint64_t>(unread - kLowWaterMargin, kStreamPieceBytes)
                                 : 1;
    if (mark == low_water_) return;
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().set_option(
        net::socket_base::receive_low_watermark(static_cast<int>(mark)), ignored);
    low_water_ = mark;
  }

  void Close() {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(stream_).socket().close(ignored);
  }

  Origin origin_;
  HttpCallSpec spec_;
  const HttpStreamSink* sink_;
  tcp::resolver resolver_;
  Stream stream_;
  http::request<http::string_body> req_;
  http::response_parser<http::string_body> parser_;
  http::response_parser<http::buffer_body> stream_parser_;
  beast::flat_buffer buffer_;
  std::unique_ptr<char[]> piece_ = std::make_unique<char[]>(kStreamPieceBytes);
  uint64_t handed_ = 0;     // body bytes handed to the sink
  uint64_t low_water_ = 1;  // the socket's SO_RCVLOWAT
  absl::StatusOr<HttpResult> result_ = absl::UnavailableError("request did not complete");
  absl::Status stream_status_ = absl::UnavailableError("request did not complete");
};

// Runs `call` on `io` until it finishes or spec.cancel stops the context.
template <class C>
void RunToEnd(net::io_context& io, C& call, CancelToken* cancel) {
  {
    CancelToken::Registration reg(cancel, [&io] { io.stop(); });
    call->Start();
    io.run();
  }
  if (cancel != nullptr && cancel->cancelled()) {
    // Stopped: let the aborted operations complete so that nothing outlives the context.
    call->Abort();
    io.restart();
    io.run();
  }
}

template <class F>
auto WithStream(const Origin& origin, const std::optional<std::string>& ca_bundle,
                const HttpCallSpec& spec, const HttpStreamSink* sink, F&& finish)
    -> decltype(finish(std::declval<std::shared_ptr<Call<beast::tcp_stream>>&>())) {
  net::io_context io;
  if (origin.tls) {
    absl::StatusOr<std::shared_ptr<ssl::context>> ctx = MakeClientTlsContext(ca_bundle);
    if (!ctx.ok()) return ctx.status();
    auto call = std::make_shared<Call<beast::ssl_stream<beast::tcp_stream>>>(io, origin, spec,
                                                                             sink, io, **ctx);
    RunToEnd(io, call, spec.cancel);
    return finish(call);
  }
  static std::atomic<bool> warned{false};  // once per process: a preparation makes many calls
  if (!warned.exchange(true)) {
    LogWarning(
        "calling Core over plain http (insecure_allow_http): the connection is not encrypted "
        "or authenticated; development only",
        {{"core_origin", origin.text}});
  }
  auto call = std::make_shared<Call<beast::tcp_stream>>(io, origin, spec, sink, io);
  RunToEnd(io, call, spec.cancel);
  return finish(call);
}

absl::Status CancelledError(const HttpCallSpec& spec) {
  return absl::CancelledError(absl::StrCat("cancelled: ", spec.method, " ", spec.target));
}

}  // namespace

absl::StatusOr<HttpResult> HttpCall(const Origin& origin,
                                    const std::optional<std::string>& ca_bundle,
                                    const HttpCallSpec& spec) {
  return WithStream(origin, ca_bundle, spec, nullptr,
                    [&spec](auto& call) -> absl::StatusOr<HttpResult> {
                      if (spec.cancel != nullptr && spec.cancel->cancelled()) {
                        return CancelledError(spec);
                      }
                      return call->result();
                    });
}

absl::Status HttpGetStream(const Origin& origin, const std::optional<std::string>& ca_bundle,
                           const HttpCallSpec& spec, const HttpStreamSink& sink) {
  return WithStream(origin, ca_bundle, spec, &sink, [&spec](auto& call) -> absl::Status {
    if (spec.cancel != nullptr && spec.cancel->cancelled()) return CancelledError(spec);
    return call->stream_status();
  });
}

}  // namespace sn::agent

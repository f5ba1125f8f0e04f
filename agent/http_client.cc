#include "agent/http_client.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <memory>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/tls.h"
#include "common/log.h"

namespace sn::agent {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

template <class Stream>
class Call : public std::enable_shared_from_this<Call<Stream>> {
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

 public:
  template <class... StreamArgs>
  Call(net::io_context& io, const Origin& origin, const HttpCallSpec& spec,
       StreamArgs&&... stream_args)
      : origin_(origin),
        spec_(spec),
        resolver_(io),
        stream_(std::forward<StreamArgs>(stream_args)...) {}

  void Start() {
    auto self = this->shared_from_this();
    beast::get_lowest_layer(stream_).expires_after(
        std::chrono::nanoseconds(absl::ToInt64Nanoseconds(spec_.timeout)));
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

  absl::StatusOr<HttpResult> result() const { return result_; }

 private:
  void Fail(std::string why) {
    result_ = absl::UnavailableError(std::move(why));
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
  }

  void Connect(const tcp::resolver::results_type& results) {
    auto self = this->shared_from_this();
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
    if (!spec_.body.empty()) req_.set(http::field::content_type, "application/json");
    req_.body() = spec_.body;
    req_.prepare_payload();
    auto self = this->shared_from_this();
    http::async_write(stream_, req_, [self](const beast::error_code& ec, size_t) {
      if (ec) return self->Fail(absl::StrCat("cannot send the request: ", ec.message()));
      self->Read();
    });
  }

  void Read() {
    parser_.body_limit(spec_.max_body_bytes);
    auto self = this->shared_from_this();
    http::async_read(stream_, buffer_, parser_, [self](const beast::error_code& ec, size_t) {
      if (ec) return self->Fail(absl::StrCat("cannot read the response: ", ec.message()));
      HttpResult r;
      r.status = static_cast<int>(self->parser_.get().result_int());
      r.body = std::move(self->parser_.get().body());
      self->result_ = std::move(r);
      beast::error_code ignored;
      beast::get_lowest_layer(self->stream_).socket().shutdown(tcp::socket::shutdown_both,
                                                               ignored);
      beast::get_lowest_layer(self->stream_).socket().close(ignored);
    });
  }

  Origin origin_;
  HttpCallSpec spec_;
  tcp::resolver resolver_;
  Stream stream_;
  http::request<http::string_body> req_;
  http::response_parser<http::string_body> parser_;
  beast::flat_buffer buffer_;
  absl::StatusOr<HttpResult> result_ = absl::UnavailableError("request did not complete");
};

}  // namespace

absl::StatusOr<HttpResult> HttpCall(const Origin& origin,
                                    const std::optional<std::string>& ca_bundle,
                                    const HttpCallSpec& spec) {
  net::io_context io;
  if (origin.tls) {
    absl::StatusOr<std::shared_ptr<ssl::context>> ctx = MakeClientTlsContext(ca_bundle);
    if (!ctx.ok()) return ctx.status();
    auto call = std::make_shared<Call<beast::ssl_stream<beast::tcp_stream>>>(io, origin, spec, io,
                                                                             **ctx);
    call->Start();
    io.run();
    return call->result();
  }
  LogWarning(
      "calling Core over plain http (insecure_allow_http): the connection is not encrypted or "
      "authenticated; development only",
      {{"core_origin", origin.text}});
  auto call = std::make_shared<Call<beast::tcp_stream>>(io, origin, spec, io);
  call->Start();
  io.run();
  return call->result();
}

}  // namespace sn::agent

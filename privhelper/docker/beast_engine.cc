#include "privhelper/docker/beast_engine.h"

#include <sys/un.h>

#include <cerrno>
#include <chrono>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/str_cat.h"

namespace sn::docker {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Protocol = net::local::stream_protocol;
using Stream = beast::basic_stream<Protocol, net::any_io_executor, beast::unlimited_rate_policy>;

std::string Detail(std::string_view what, const beast::error_code& ec) {
  return absl::StrCat(absl::string_view(what.data(), what.size()), ": ", ec.message());
}

absl::Status ConnectError(const std::string& path, const beast::error_code& ec) {
  std::string detail = absl::StrCat("connect ", path, ": ", ec.message());
  if (ec == beast::error::timeout) return TransportError(TransportFailure::kTimeout, detail);
  if (ec.category() == boost::system::system_category()) {
    switch (ec.value()) {
      case ENOENT:
      case ENOTDIR:
        return TransportError(TransportFailure::kSocketMissing, detail);
      case ECONNREFUSED:
        return TransportError(TransportFailure::kConnectionRefused, detail);
      case EACCES:
      case EPERM:
        return TransportError(TransportFailure::kPermissionDenied, detail);
      default:
        break;
    }
  }
  return TransportError(TransportFailure::kIo, detail);
}

absl::Status ReadError(const beast::error_code& ec) {
  std::string detail = Detail("read response", ec);
  if (ec == beast::error::timeout) return TransportError(TransportFailure::kTimeout, detail);
  if (ec == http::error::body_limit || ec == http::error::buffer_overflow) {
    return TransportError(TransportFailure::kResponseTooLarge, detail);
  }
  if (ec.category() == http::make_error_code(http::error::end_of_stream).category()) {
    return TransportError(TransportFailure::kMalformedResponse, detail);
  }
  return TransportError(TransportFailure::kIo, detail);
}

// Runs the io_context until the pending operation completes; the stream's deadline bounds it.
void RunOne(net::io_context& ioc) {
  ioc.restart();
  ioc.run();
}

}  // namespace

BeastDockerEngine::BeastDockerEngine(std::string socket_path)
    : socket_path_(std::move(socket_path)) {}

absl::StatusOr<HttpResponse> BeastDockerEngine::Request(std::string_view method,
                                                        std::string_view target,
                                                        std::string_view body,
                                                        const RequestOptions& options) {
  if (socket_path_.empty() || socket_path_.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return TransportError(TransportFailure::kSocketMissing,
                          absl::StrCat("unusable socket path length ", socket_path_.size()));
  }
  http::verb verb = http::string_to_verb(method);
  if (verb == http::verb::unknown || target.empty() || target[0] != '/') {
    return absl::InvalidArgumentError("docker request: bad method or target");
  }

  net::io_context ioc;
  Stream stream(ioc);
  stream.expires_after(std::chrono::milliseconds(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(options.timeout))));

  beast::error_code ec;
  stream.async_connect(Protocol::endpoint(socket_path_),
                       [&ec](const beast::error_code& e) { ec = e; });
  RunOne(ioc);
  if (ec) return ConnectError(socket_path_, ec);

  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "docker");
  req.set(http::field::user_agent, "sandbox-node-privhelper");
  req.keep_alive(false);
  if (!body.empty()) {
    req.set(http::field::content_type, options.content_type);
    req.body().assign(body.data(), body.size());
  }
  req.prepare_payload();
  http::async_write(stream, req, [&ec](const beast::error_code& e, size_t) { ec = e; });
  RunOne(ioc);
  if (ec) {
    if (ec == beast::error::timeout) {
      return TransportError(TransportFailure::kTimeout, Detail("write request", ec));
    }
    return TransportError(TransportFailure::kIo, Detail("write request", ec));
  }

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(options.max_response_bytes);
  // The header first: Boost 1.74 reports an over-limit Content-Length but a continued read
  // would then accept the body anyway, so the declared length is checked here.
  http::async_read_header(stream, buffer, parser,
                          [&ec](const beast::error_code& e, size_t) { ec = e; });
  RunOne(ioc);
  if (ec) return ReadError(ec);
  if (parser.content_length().has_value() &&
      *parser.content_length() > options.max_response_bytes) {
    return TransportError(TransportFailure::kResponseTooLarge,
                          absl::StrCat("declared body of ", *parser.content_length(), " bytes"));
  }
  if (!parser.is_done()) {
    http::async_read(stream, buffer, parser,
                     [&ec](const beast::error_code& e, size_t) { ec = e; });
    RunOne(ioc);
    if (ec) return ReadError(ec);
  }

  http::response<http::string_body> res = parser.release();
  HttpResponse out;
  out.status = static_cast<int>(res.result_int());
  auto ct = res.find(http::field::content_type);
  if (ct != res.end()) out.content_type = std::string(ct->value());
  out.body = std::move(res.body());

  beast::error_code ignored;
  stream.socket().shutdown(Protocol::socket::shutdown_both, ignored);
  stream.socket().close(ignored);
  return out;
}

}  // namespace sn::docker

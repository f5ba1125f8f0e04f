#include "privhelper/docker/beast_engine.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <limits>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/http/span_body.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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

// A failed write or raw read: a timeout, or any other socket error.
absl::Status IoError(std::string_view what, const beast::error_code& ec) {
  std::string detail = Detail(what, ec);
  if (ec == beast::error::timeout) return TransportError(TransportFailure::kTimeout, detail);
  return TransportError(TransportFailure::kIo, detail);
}

// Runs the io_context until the pending operation completes; the stream's deadline bounds it.
void RunOne(net::io_context& ioc) {
  ioc.restart();
  ioc.run();
}

// The checks every request passes before any I/O; sets *verb.
absl::Status CheckRequest(const std::string& socket_path, std::string_view method,
                          std::string_view target, http::verb* verb) {
  if (socket_path.empty() || socket_path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return TransportError(TransportFailure::kSocketMissing,
                          absl::StrCat("unusable socket path length ", socket_path.size()));
  }
  *verb = http::string_to_verb(method);
  if (*verb == http::verb::unknown || target.empty() || target[0] != '/') {
    return absl::InvalidArgumentError("docker request: bad method or target");
  }
  return absl::OkStatus();
}

// Connects `stream` to the daemon on a socket opened close-on-exec, so no helper privhelper
// spawns inherits a daemon connection.
absl::Status Connect(Stream& stream, net::io_context& ioc, const std::string& socket_path) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return TransportError(TransportFailure::kIo, absl::StrCat("socket: ", strerror(errno)));
  beast::error_code ec;
  stream.socket().assign(Protocol(), s, ec);
  if (ec) {
    close(s);
    return IoError("socket", ec);
  }
  stream.async_connect(Protocol::endpoint(socket_path),
                       [&ec](const beast::error_code& e) { ec = e; });
  RunOne(ioc);
  if (ec) return ConnectError(socket_path, ec);
  return absl::OkStatus();
}

// The request line, Docker's headers and the body (with its Content-Type when not empty).
// The body is referenced, never copied (a span over the caller's bytes, which outlive the
// write): a 48 MiB archive is sent straight from the caller's buffer.
using SpanRequest = http::request<http::span_body<const char>>;
SpanRequest MakeRequest(http::verb verb, std::string_view target, std::string_view body,
                    const std::string& content_type) {
  SpanRequest req{verb, beast::string_view(target.data(), target.size()), 11};
  req.set(http::field::host, "docker");
  req.set(http::field::user_agent, "sandbox-node-privhelper");
  if (!body.empty()) {
    req.set(http::field::content_type, content_type);
    req.body() = beast::span<const char>(body.data(), body.size());
  }
  return req;
}

}  // namespace

BeastDockerEngine::BeastDockerEngine(std::string socket_path)
    : socket_path_(std::move(socket_path)) {}

BeastDockerEngine::~BeastDockerEngine() {
  absl::MutexLock lock(&idle_mu_);
  for (int fd : idle_) close(fd);
  idle_.clear();
}

int BeastDockerEngine::TakeIdle() {
  absl::MutexLock lock(&idle_mu_);
  while (!idle_.empty()) {
    int fd = idle_.back();
    idle_.pop_back();
    // A kept connection the daemon has closed (or that holds unread bytes) is discarded.
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) == 0) return fd;
    close(fd);
  }
  return -1;
}

void BeastDockerEngine::PutIdle(int fd) {
  absl::MutexLock lock(&idle_mu_);
  if (idle_.size() >= kMaxIdleConnections) {
    close(fd);
    return;
  }
  idle_.push_back(fd);
}

size_t BeastDockerEngine::idle_connections() const {
  absl::MutexLock lock(&idle_mu_);
  return idle_.size();
}

// Boost.Asio reports some failures by throwing (an io_context that cannot get an epoll
// descriptor when the process is out of them, for one). Nothing may escape into privhelper:
// such a failure is a typed I/O error, which a mutation's caller treats as uncertain.
template <typename Fn>
absl::StatusOr<HttpResponse> Guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return TransportError(TransportFailure::kIo, absl::StrCat("asio: ", e.what()));
  }
}

absl::StatusOr<HttpResponse> BeastDockerEngine::Request(std::string_view method,
                                                        std::string_view target,
                                                        std::string_view body,
                                                        const RequestOptions& options) {
  http::verb verb;
  if (absl::Status s = CheckRequest(socket_path_, method, target, &verb); !s.ok()) return s;
  const absl::Time deadline = absl::Now() + options.timeout;
  // Only GET reuses a kept connection: when a kept connection turns out closed before any
  // answer, the request is sent again on a new one, which is safe for a GET only. Every
  // mutation gets a connection of its own, so it is written exactly once.
  if (verb == http::verb::get) {
    int fd = TakeIdle();
    if (fd >= 0) {
      bool unanswered = false;
      absl::StatusOr<HttpResponse> r = Guarded([&] {
        return Exchange(fd, static_cast<int>(verb), target, body, options, deadline, &unanswered);
      });
      if (r.ok() || !unanswered) return r;
    }
  }
  return Guarded([&] {
    return Exchange(-1, static_cast<int>(verb), target, body, options, deadline, nullptr);
  });
}

namespace {

// The request's head, for a body written after it (a source or gathered parts).
http::request<http::empty_body> BodyHead(http::verb verb, std::string_view target,
                                         const RequestOptions& options, uint64_t length,
                                         bool keep) {
  http::request<http::empty_body> head{verb, beast::string_view(target.data(), target.size()),
                                       11};
  head.set(http::field::host, "docker");
  head.set(http::field::user_agent, "sandbox-node-privhelper");
  head.set(http::field::content_type, options.content_type);
  head.content_length(length);
  head.keep_alive(keep);
  return head;
}

// Writes the request: the head and a body read from `options.body_source` in 64 KiB pieces,
// the head and `options.body_parts` in one gathered write, or `body` with its head. A failed
// write is left in `*ec` (the caller decides whether a kept connection went unanswered); an
// error returned is the request's own (a body source that failed or ended early).
absl::Status WriteRequest(Stream& stream, net::io_context& ioc, http::verb verb,
                          std::string_view target, std::string_view body,
                          const RequestOptions& options, bool keep, beast::error_code* ec) {
  auto done = [ec](const beast::error_code& e, size_t) { *ec = e; };
  if (options.body_source) {
    if (!body.empty() || !options.body_parts.empty()) {
      return absl::InvalidArgumentError("docker request: body_source with another body");
    }
    http::request<http::empty_body> head =
        BodyHead(verb, target, options, options.body_source_size, keep);
    http::request_serializer<http::empty_body> sr{head};
    http::async_write_header(stream, sr, done);
    RunOne(ioc);
    std::string chunk(64 * 1024, '\0');
    uint64_t sent = 0;
    while (!*ec && sent < options.body_source_size) {
      const size_t want =
          static_cast<size_t>(std::min<uint64_t>(chunk.size(), options.body_source_size - sent));
      absl::StatusOr<size_t> got = options.body_source(chunk.data(), want);
      if (!got.ok()) return got.status();  // nothing more can be sent: the daemon sees a cut
      if (*got == 0 || *got > want) {
        return TransportError(TransportFailure::kIo, "request body source ended early");
      }
      net::async_write(stream, net::buffer(chunk.data(), *got), done);
      RunOne(ioc);
      sent += *got;
    }
    return absl::OkStatus();
  }
  if (!options.body_parts.empty()) {
    if (!body.empty()) return absl::InvalidArgumentError("docker request: body and body_parts");
    // The header with the total length, then the pieces in one gathered write.
    uint64_t total = 0;
    std::vector<net::const_buffer> pieces;
    for (std::string_view part : options.body_parts) {
      total += part.size();
      pieces.emplace_back(part.data(), part.size());
    }
    http::request<http::empty_body> head = BodyHead(verb, target, options, total, keep);
    http::request_serializer<http::empty_body> sr{head};
    http::async_write_header(stream, sr, done);
    RunOne(ioc);
    if (!*ec) {
      net::async_write(stream, pieces, done);
      RunOne(ioc);
    }
    return absl::OkStatus();
  }
  SpanRequest req = MakeRequest(verb, target, body, options.content_type);
  req.keep_alive(keep);
  req.prepare_payload();
  http::async_write(stream, req, done);
  RunOne(ioc);
  return absl::OkStatus();
}

// Reads the answer's head, then its body in 64 KiB pieces: into `out->body` up to
// `options.max_response_bytes`, or, for a 2xx answer with a `body_sink`, to the sink until it
// says stop (`*stopped`). `*unanswered` (when given) is set if the connection closed before any
// byte of an answer.
absl::Status ReadResponse(Stream& stream, net::io_context& ioc, beast::flat_buffer& buffer,
                          http::response_parser<http::buffer_body>& parser,
                          const RequestOptions& options, HttpResponse* out, bool* stopped,
                          bool* unanswered) {
  beast::error_code ec;
  auto done = [&ec](const beast::error_code& e, size_t) { ec = e; };
  // Enforced below, per chunk. (Boost 1.74 treats boost::none as a zero limit for
  // Content-Length bodies, so the "unlimited" value is explicit.)
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::async_read_header(stream, buffer, parser, done);
  RunOne(ioc);
  if (ec) {
    // A kept connection the daemon closed before answering: nothing was answered.
    if (unanswered != nullptr && buffer.size() == 0 && !parser.got_some() &&
        ec != beast::error::timeout) {
      *unanswered = true;
    }
    return ReadError(ec);
  }
  out->status = static_cast<int>(parser.get().result_int());
  auto ct = parser.get().find(http::field::content_type);
  if (ct != parser.get().end()) out->content_type = std::string(ct->value());
  const bool streaming = static_cast<bool>(options.body_sink) && out->status / 100 == 2;
  if (!streaming && parser.content_length().has_value() &&
      *parser.content_length() > options.max_response_bytes) {
    return TransportError(TransportFailure::kResponseTooLarge,
                          absl::StrCat("declared body of ", *parser.content_length(), " bytes"));
  }
  std::string chunk(64 * 1024, '\0');
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    http::async_read(stream, buffer, parser, done);
    RunOne(ioc);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return ReadError(ec);
    size_t n = chunk.size() - parser.get().body().size;
    if (n == 0) continue;
    std::string_view piece(chunk.data(), n);
    if (streaming) {
      if (!options.body_sink(piece)) {
        *stopped = true;
        return absl::OkStatus();
      }
    } else {
      if (out->body.size() + n > options.max_response_bytes) {
        return TransportError(TransportFailure::kResponseTooLarge, "body over the limit");
      }
      out->body.append(piece);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HttpResponse> BeastDockerEngine::Exchange(int fd, http_verb_t verb_value,
                                                         std::string_view target,
                                                         std::string_view body,
                                                         const RequestOptions& options,
                                                         absl::Time deadline, bool* unanswered) {
  const http::verb verb = static_cast<http::verb>(verb_value);
  const bool keep = verb == http::verb::get;
  net::io_context ioc;
  Stream stream(ioc);
  stream.expires_after(std::chrono::milliseconds(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()))));
  beast::error_code ec;
  if (fd >= 0) {
    stream.socket().assign(Protocol(), fd, ec);
    if (ec) {
      close(fd);
      if (unanswered != nullptr) *unanswered = true;
      return TransportError(TransportFailure::kIo, Detail("adopt kept connection", ec));
    }
  } else if (absl::Status c = Connect(stream, ioc, socket_path_); !c.ok()) {
    return c;
  }

  RETURN_IF_ERROR(WriteRequest(stream, ioc, verb, target, body, options, keep, &ec));
  if (ec) {
    if (unanswered != nullptr) *unanswered = true;
    return IoError("write request", ec);
  }

  beast::flat_buffer buffer;
  buffer.reserve(16 * 1024);  // whole answers in one read, not 512-byte pieces
  http::response_parser<http::buffer_body> parser;
  HttpResponse out;
  bool stopped = false;
  RETURN_IF_ERROR(
      ReadResponse(stream, ioc, buffer, parser, options, &out, &stopped, unanswered));

  beast::error_code ignored;
  if (keep && !stopped && parser.is_done() && parser.keep_alive() && buffer.size() == 0) {
    int kept = stream.socket().release(ignored);
    if (!ignored && kept >= 0) PutIdle(kept);
    return out;
  }
  stream.socket().shutdown(Protocol::socket::shutdown_both, ignored);
  stream.socket().close(ignored);
  return out;
}

absl::StatusOr<HttpResponse> BeastDockerEngine::Hijack(
    std::string_view method, std::string_view target, std::string_view body,
    std::string_view input, bool close_input, const std::function<bool(std::string_view)>& sink,
    const RequestOptions& options) {
  return Guarded(
      [&] { return HijackUnguarded(method, target, body, input, close_input, sink, options); });
}

absl::StatusOr<HttpResponse> BeastDockerEngine::HijackUnguarded(
    std::string_view method, std::string_view target, std::string_view body,
    std::string_view input, bool close_input, const std::function<bool(std::string_view)>& sink,
    const RequestOptions& options) {
  http::verb verb;
  if (absl::Status s = CheckRequest(socket_path_, method, target, &verb); !s.ok()) return s;
  net::io_context ioc;
  Stream stream(ioc);
  stream.expires_after(std::chrono::milliseconds(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(options.timeout))));
  if (absl::Status c = Connect(stream, ioc, socket_path_); !c.ok()) return c;

  SpanRequest req = MakeRequest(verb, target, body, options.content_type);
  req.set(http::field::connection, "Upgrade");
  req.set(http::field::upgrade, "tcp");
  req.prepare_payload();
  beast::error_code ec;
  http::async_write(stream, req, [&ec](const beast::error_code& e, size_t) { ec = e; });
  RunOne(ioc);
  if (ec) return IoError("write request", ec);

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(options.max_response_bytes);
  http::async_read_header(stream, buffer, parser,
                          [&ec](const beast::error_code& e, size_t) { ec = e; });
  RunOne(ioc);
  if (ec) return ReadError(ec);
  HttpResponse out;
  out.status = static_cast<int>(parser.get().result_int());
  if (out.status != 101 && out.status != 200) {
    // An ordinary error answer: read its (bounded) body.
    if (parser.content_length().has_value() &&
        *parser.content_length() > options.max_response_bytes) {
      return TransportError(TransportFailure::kResponseTooLarge, "error body over the limit");
    }
    if (!parser.is_done()) {
      http::async_read(stream, buffer, parser, [&ec](const beast::error_code& e, size_t) { ec = e; });
      RunOne(ioc);
      if (ec) return ReadError(ec);
    }
    out.body = parser.get().body();
    return out;
  }
  // Bytes already buffered beyond the header belong to the raw stream.
  bool more = true;
  if (buffer.size() > 0) {
    std::string_view head(static_cast<const char*>(buffer.data().data()), buffer.size());
    more = sink(head);
    buffer.consume(buffer.size());
  }
  if (!input.empty()) {
    net::async_write(stream, net::buffer(input.data(), input.size()),
                     [&ec](const beast::error_code& e, size_t) { ec = e; });
    RunOne(ioc);
    if (ec) return IoError("write input", ec);
  }
  if (close_input) {
    beast::error_code ignored;
    stream.socket().shutdown(Protocol::socket::shutdown_send, ignored);
  }
  std::string chunk(64 * 1024, '\0');
  while (more) {
    size_t n = 0;
    stream.async_read_some(net::buffer(chunk.data(), chunk.size()),
                           [&ec, &n](const beast::error_code& e, size_t got) {
                             ec = e;
                             n = got;
                           });
    RunOne(ioc);
    if (n > 0) more = sink(std::string_view(chunk.data(), n));
    if (ec == net::error::eof) break;
    if (ec) return IoError("read stream", ec);
  }
  beast::error_code ignored;
  stream.socket().close(ignored);
  return out;
}

}  // namespace sn::docker

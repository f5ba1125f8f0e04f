#include "agent/metrics/metrics_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace sn::agent {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

template <class Protocol>
class Session : public std::enable_shared_from_this<Session<Protocol>> {
 public:
  Session(typename Protocol::socket socket, std::shared_ptr<int> active,
          std::shared_ptr<const std::vector<LocalRoute>> routes,
          std::chrono::milliseconds io_timeout)
      : stream_(std::move(socket)),
        active_(std::move(active)),
        routes_(std::move(routes)),
        io_timeout_(io_timeout) {
    ++*active_;
    parser_.header_limit(kMaxMetricsRequestBytes);
    parser_.body_limit(0);
  }
  ~Session() { --*active_; }

  void Run() {
    stream_.expires_after(io_timeout_);
    http::async_read(stream_, buffer_, parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       if (!ec) self->Answer();
                     });
  }

 private:
  void Answer() {
    const auto& req = parser_.get();
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(req.version());
    res->keep_alive(false);
    const LocalRoute* route = nullptr;
    for (const LocalRoute& r : *routes_) {
      if (req.target() == r.path) route = &r;
    }
    if (req.method() != http::verb::get) {
      res->result(http::status::method_not_allowed);
      res->set(http::field::allow, "GET");
    } else if (route == nullptr) {
      res->result(http::status::not_found);
      res->set(http::field::content_type, "text/plain; charset=utf-8");
      res->body() = "not served here\n";
    } else {
      res->result(http::status::ok);
      res->set(http::field::content_type, route->content_type);
      res->body() = route->render();
    }
    res->prepare_payload();
    stream_.expires_after(io_timeout_);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res](beast::error_code, size_t) {
                        beast::error_code ignored;
                        self->stream_.socket().shutdown(Protocol::socket::shutdown_send, ignored);
                        self->stream_.close();
                      });
  }

  beast::basic_stream<Protocol> stream_;
  beast::flat_buffer buffer_{kMaxMetricsRequestBytes};
  http::request_parser<http::empty_body> parser_;
  std::shared_ptr<int> active_;
  std::shared_ptr<const std::vector<LocalRoute>> routes_;
  std::chrono::milliseconds io_timeout_;
};

template <class Protocol>
class Server final : public MetricsServer {
 public:
  Server(asio::io_context& io, std::vector<LocalRoute> routes, std::string address,
         std::chrono::milliseconds io_timeout)
      : acceptor_(io),
        routes_(std::make_shared<const std::vector<LocalRoute>>(std::move(routes))),
        address_(std::move(address)),
        io_timeout_(io_timeout) {}
  ~Server() override {
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

  absl::Status Listen(const typename Protocol::endpoint& at) {
    beast::error_code ec;
    acceptor_.open(at.protocol(), ec);
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    }
    if (!ec) acceptor_.bind(at, ec);
    if (!ec) acceptor_.listen(kMaxMetricsConnections, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("metrics listener: ", ec.message()));
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      const auto bound = acceptor_.local_endpoint(ec);
      const std::string ip = bound.address().to_string();
      address_ = bound.address().is_v6() ? absl::StrCat("[", ip, "]:", bound.port())
                                         : absl::StrCat(ip, ":", bound.port());
    }
    Accept();
    return absl::OkStatus();
  }

  std::string address() const override { return address_; }

 private:
  void Accept() {
    acceptor_.async_accept([this, alive = std::weak_ptr<bool>(alive_)](
                               beast::error_code ec, typename Protocol::socket socket) {
      if (alive.expired() || ec == asio::error::operation_aborted) return;
      if (!ec) {
        if (*active_ >= kMaxMetricsConnections) {
          beast::error_code ignored;
          socket.close(ignored);  // bounded: a further scraper is turned away
        } else {
          std::make_shared<Session<Protocol>>(std::move(socket), active_, routes_, io_timeout_)
              ->Run();
        }
      }
      Accept();
    });
  }

  typename Protocol::acceptor acceptor_;
  std::shared_ptr<const std::vector<LocalRoute>> routes_;
  std::string address_;
  std::shared_ptr<int> active_ = std::make_shared<int>(0);
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::chrono::milliseconds io_timeout_;
};

// A unix socket path ready to bind: absent, or a stale socket (nobody accepts on it) removed.
absl::Status ClearStaleSocket(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics: ", path, " exists and is not a socket; not replacing it"));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError("metrics: socket");
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);  // the parser bounded its length
  const bool live = connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  if (live) {
    return absl::FailedPreconditionError(absl::StrCat("metrics: another process serves ", path));
  }
  unlink(path.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    asio::io_context& io, const MetricsListen& where, std::vector<LocalRoute> routes,
    int socket_mode, std::chrono::milliseconds io_timeout) {
  if (!where.path.empty()) {
    if (where.path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where.path, " is longer than a unix socket's path may be"));
    }
    if (absl::Status s = ClearStaleSocket(where.path); !s.ok()) return s;
    auto server = std::make_unique<Server<asio::local::stream_protocol>>(io, std::move(routes),
                                                                         where.path, io_timeout);
    if (absl::Status s = server->Listen(asio::local::stream_protocol::endpoint(where.path));
        !s.ok()) {
      return s;
    }
    if (chmod(where.path.c_str(), static_cast<mode_t>(socket_mode)) != 0) {
      return absl::UnavailableError(absl::StrCat("metrics: chmod ", where.path));
    }
    return std::unique_ptr<MetricsServer>(std::move(server));
  }
  beast::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(where.ip, ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrCat("metrics: ", where.ip, ": ", ec.message()));
  auto server = std::make_unique<Server<asio::ip::tcp>>(io, std::move(routes), "", io_timeout);
  if (absl::Status s = server->Listen(asio::ip::tcp::endpoint(ip, where.port)); !s.ok()) return s;
  return std::unique_ptr<MetricsServer>(std::move(server));
}

}  // namespace sn::agent

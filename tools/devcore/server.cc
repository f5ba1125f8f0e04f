#include "tools/devcore/server.h"

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tools/devcore/server_sessions.h"

namespace sn::devcore {

using internal::beast::ssl_stream;
using internal::beast::tcp_stream;
using internal::tcp;
namespace ssl = boost::asio::ssl;

class Server::Impl : public std::enable_shared_from_this<Server::Impl> {
 public:
  Impl(boost::asio::io_context& ioc, Devcore* devcore)
      : ioc_(ioc), acceptor_(ioc), ctx_(std::make_shared<internal::ServerContext>()) {
    ctx_->devcore = devcore;
  }

  absl::Status Init(const ServerOptions& options) {
    const size_t colon = options.listen.rfind(':');
    if (colon == std::string::npos) return absl::InvalidArgumentError("--listen=HOST:PORT");
    std::string host = options.listen.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    int port = -1;
    if (!absl::SimpleAtoi(options.listen.substr(colon + 1), &port) || port < 0 ||
        port > 65535) {
      return absl::InvalidArgumentError("--listen: port must be 0..65535");
    }
    boost::system::error_code ec;
    const auto addr = boost::asio::ip::make_address(host, ec);
    if (ec) return absl::InvalidArgumentError("--listen: HOST must be an IP address");
    if (options.tls_cert.empty() != options.tls_key.empty()) {
      return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    if (!options.tls_cert.empty()) {
      tls_ = std::make_unique<ssl::context>(ssl::context::tls_server);
      tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                            ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                            ssl::context::no_tlsv1_1,
                        ec);
      tls_->use_certificate_chain_file(options.tls_cert, ec);
      if (ec) return absl::InvalidArgumentError("cannot load --tls-cert " + options.tls_cert);
      tls_->use_private_key_file(options.tls_key, ssl::context::pem, ec);
      if (ec) return absl::InvalidArgumentError("cannot load --tls-key " + options.tls_key);
    }
    const tcp::endpoint ep(addr, static_cast<unsigned short>(port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(boost::asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(boost::asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen, ": ",
                                                 ec.message()));
    }
    bound_ = acceptor_.local_endpoint(ec);
    host_ = addr.is_v6() ? absl::StrCat("[", addr.to_string(), "]") : addr.to_string();
    return absl::OkStatus();
  }

  void Accept() {
    acceptor_.async_accept(ioc_,
                           [self = shared_from_this()](boost::system::error_code ec,
                                                       tcp::socket socket) {
                             if (ec) return;  // stopped
                             self->OnAccept(std::move(socket));
                             self->Accept();
                           });
  }

  void OnAccept(tcp::socket socket) {
    if (tls_) {
      auto s = std::make_shared<internal::HttpSession<ssl_stream<tcp_stream>>>(
          ctx_, ssl_stream<tcp_stream>(tcp_stream(std::move(socket)), *tls_));
      s->Run();
    } else {
      auto s = std::make_shared<internal::HttpSession<tcp_stream>>(
          ctx_, tcp_stream(std::move(socket)));
      s->Run();
    }
  }

  void Stop() {
    ctx_->stopped = true;
    boost::system::error_code ec;
    acceptor_.close(ec);
    std::vector<internal::Abortable*> live(ctx_->live.begin(), ctx_->live.end());
    for (internal::Abortable* a : live) a->Abort();
  }

  std::string url() const { return absl::StrCat(tls_ ? "https://" : "http://", host_, ":",
                                                bound_.port()); }
  uint16_t port() const { return bound_.port(); }

 private:
  boost::asio::io_context& ioc_;
  tcp::acceptor acceptor_;
  std::unique_ptr<ssl::context> tls_;
  std::shared_ptr<internal::ServerContext> ctx_;
  tcp::endpoint bound_;
  std::string host_;
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(boost::asio::io_context& ioc,
                                                      Devcore* devcore,
                                                      const ServerOptions& options) {
  auto impl = std::make_shared<Impl>(ioc, devcore);
  absl::Status st = impl->Init(options);
  if (!st.ok()) return st;
  impl->Accept();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::~Server() = default;
std::string Server::url() const { return impl_->url(); }
uint16_t Server::port() const { return impl_->port(); }
void Server::Stop() { impl_->Stop(); }

}  // namespace sn::devcore

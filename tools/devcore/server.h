// devcore's network front: one listener (http, or https with --tls-cert/--tls-key) serving the
// HTTP routes and the node WebSocket on one asio io_context thread. Beast stays inside the
// .cc files; this header only names the io_context.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_SERVER_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tools/devcore/devcore.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace sn::devcore {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT, HOST an IP literal ([v6] allowed)
  std::string tls_cert;                // PEM chain file; with tls_key: https/wss
  std::string tls_key;                 // PEM private key file
};

class Server {
 public:
  // Binds and starts accepting. REQUIRES: `devcore` outlives the server and every connection
  // it runs (destroy or run `ioc` to completion before destroying `devcore`).
  static absl::StatusOr<std::unique_ptr<Server>> Start(boost::asio::io_context& ioc,
                                                       Devcore* devcore,
                                                       const ServerOptions& options);
  ~Server();

  // "http://HOST:PORT" or "https://HOST:PORT" with the bound port.
  std::string url() const;
  uint16_t port() const;

  // Stops accepting and aborts every connection; the io_context then runs out of work.
  // REQUIRES: runs on the io_context's thread (post it).
  void Stop();

  class Impl;

 private:
  explicit Server(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_SERVER_H_

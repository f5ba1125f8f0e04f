// The Boost.Beast WebSocket client behind Transport (transport.h): ws or wss (TLS through
// OpenSSL with certificate and host-name verification), Authorization: Bearer on the upgrade
// request only, no permessage-deflate, receive limits enforced by Beast while a message is
// received, outgoing messages fragmented at 1 MiB. Runs on one asio io_context thread; Beast
// headers stay in the .cc.
#ifndef SANDBOX_NODE_AGENT_CONNECTION_WS_TRANSPORT_H_
#define SANDBOX_NODE_AGENT_CONNECTION_WS_TRANSPORT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/connection/transport.h"
#include "agent/state/config.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace sn::agent {

struct WsTarget {
  Origin origin;
  std::string target;      // path and query, e.g. /api/v1/sandbox-node/connect?node_id=...
  std::string credential;  // a secret: only ever written into the Authorization header
  std::optional<std::string> ca_bundle;
  absl::Duration dial_timeout = absl::Seconds(30);    // DNS + TCP + TLS
  absl::Duration handshake_timeout = absl::Seconds(30);  // upgrade and close handshakes
};

class WsTransport final : public Transport {
 public:
  // InvalidArgument when the CA bundle cannot be loaded.
  static absl::StatusOr<std::unique_ptr<WsTransport>> Create(boost::asio::io_context& io,
                                                             WsTarget target);
  ~WsTransport() override;

  void SetEvents(TransportEvents* events) override;
  void Dial(size_t read_limit) override;
  void SetReadLimit(size_t bytes) override;
  void Send(std::string text) override;
  void Close(int code) override;

  class Impl;

 private:
  explicit WsTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_WS_TRANSPORT_H_

// The seam between the connection state machine (connection.h) and the WebSocket client
// (ws_transport.h). Both sides run on one event loop: the transport calls TransportEvents on
// that loop, never from another thread and never from inside a Transport method.
#ifndef SANDBOX_NODE_AGENT_CONNECTION_TRANSPORT_H_
#define SANDBOX_NODE_AGENT_CONNECTION_TRANSPORT_H_

#include <cstddef>
#include <string>

namespace sn::agent {

struct DialResult {
  enum class Kind {
    kUpgraded,        // 101: the WebSocket is open
    kHttpStatus,      // the server answered the upgrade with another HTTP status
    kTransportError,  // DNS, TCP, TLS, timeout, malformed HTTP...
  };
  Kind kind = Kind::kTransportError;
  int http_status = 0;  // for kHttpStatus
  std::string detail;   // for the log only; never holds the credential
};

struct CloseInfo {
  bool peer_close_frame = false;  // the peer sent a close frame (its code below)
  int peer_code = 0;              // the peer's close code, 0 when it sent none
  std::string detail;             // for the log only
};

class TransportEvents {
 public:
  virtual ~TransportEvents() = default;
  // Exactly one per Dial().
  virtual void OnDialResult(const DialResult& result) = 0;
  // A WebSocket frame of any kind (data, continuation, ping, pong, close) arrived.
  virtual void OnActivity() = 0;
  // One complete reassembled message (within the read limit). `text` is false for binary.
  virtual void OnMessage(std::string payload, bool text) = 0;
  // The upgraded connection ended (close handshake done, peer vanished, receive limit
  // exceeded: the transport then already sent 1009). Exactly once per kUpgraded dial.
  virtual void OnClosed(const CloseInfo& info) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // REQUIRES: called once, before the first Dial.
  virtual void SetEvents(TransportEvents* events) = 0;
  // Opens a new connection to the configured target. REQUIRES: no connection is dialing or
  // open (the previous one reported OnClosed, or its dial failed). `read_limit` is the
  // receive limit for reassembled messages until SetReadLimit changes it.
  virtual void Dial(size_t read_limit) = 0;
  // Changes the receive limit of the open connection.
  virtual void SetReadLimit(size_t bytes) = 0;
  // Queues one text message. Messages go out in order, fragmented at 1 MiB.
  // REQUIRES: the connection is open and Close() was not called.
  virtual void Send(std::string text) = 0;
  // Starts the close handshake with `code` after the messages already queued; OnClosed
  // follows (also when the peer does not answer: the transport bounds the handshake).
  virtual void Close(int code) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_TRANSPORT_H_

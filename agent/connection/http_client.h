// A small blocking HTTP(S) client for the machine connection API routes and the console
// release routes (spec/wire.md §6): the same origin rules and TLS verification as the
// WebSocket transport (tls.h). Used by `agent enroll` (no event loop of its own) and by the
// preparation worker thread; never on the event loop. Beast headers stay in the .cc.
#ifndef SANDBOX_NODE_AGENT_CONNECTION_HTTP_CLIENT_H_
#define SANDBOX_NODE_AGENT_CONNECTION_HTTP_CLIENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/connection/cancel_token.h"
#include "agent/state/config.h"

namespace sn::agent {

struct HttpCallSpec {
  std::string method;  // "GET" or "POST"
  std::string target;  // path and query
  std::string body;    // sent with Content-Type: application/json when non-empty
  std::optional<std::string> bearer;  // a secret: only ever written into Authorization
  // HttpCall: the whole exchange. HttpGetStream: the longest wait for the next bytes (the
  // stream itself is bounded by its caller's cancellation, e.g. a preparation deadline).
  absl::Duration timeout = absl::Seconds(30);
  size_t max_body_bytes = 1 << 20;  // HttpCall only
  // When set, Cancel() interrupts the call at once (it then answers Cancelled).
  CancelToken* cancel = nullptr;
  // HttpGetStream: when set, the request asks for the body from this byte on
  // (`Range: bytes=N-`); the sink sees the answer's Content-Range and decides.
  std::optional<uint64_t> range_from;
};

struct HttpResult {
  int status = 0;
  std::string body;
};

// One request on a fresh connection. Unavailable for DNS, TCP, TLS (including certificate
// verification: the message says so), timeout and malformed responses; ResourceExhausted for
// a body over max_body_bytes; Cancelled when spec.cancel was cancelled.
absl::StatusOr<HttpResult> HttpCall(const Origin& origin,
                                    const std::optional<std::string>& ca_bundle,
                                    const HttpCallSpec& spec);

// What a streaming GET hands its caller: first the head, then the body in order.
struct HttpStreamSink {
  // The status and the Content-Length (nullopt when chunked). A non-OK answer stops the
  // exchange and is returned as it is; the body is then never read.
  std::function<absl::Status(int status, std::optional<uint64_t> content_length)> on_head;
  // When set: the answer's Content-Range ("" when it has none), just before on_head.
  std::function<void(std::string_view content_range)> on_content_range;
  // Each piece of the body as it arrives (at most 256 KiB; nothing else is accumulated). A
  // non-OK answer stops the exchange and is returned as it is.
  std::function<absl::Status(std::string_view bytes)> on_data;
};

// A GET whose body is never held in memory: it is read 256 KiB at a time into `sink`. OK once
// the whole body arrived and the sink took it. The sink's own errors come back unchanged;
// the client's are Unavailable (connection, TLS, a stream cut before its end, the idle
// timeout of spec.timeout) or Cancelled.
absl::Status HttpGetStream(const Origin& origin, const std::optional<std::string>& ca_bundle,
                           const HttpCallSpec& spec, const HttpStreamSink& sink);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_HTTP_CLIENT_H_

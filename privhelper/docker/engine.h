// The Docker Engine API seam. Provider logic talks to a DockerEngine; the production
// implementation (BeastDockerEngine, beast_engine.h) speaks HTTP/1.1 over the daemon's unix
// socket, and tests substitute fakes (tests/privhelper/).
#ifndef SANDBOX_NODE_PRIVHELPER_DOCKER_ENGINE_H_
#define SANDBOX_NODE_PRIVHELPER_DOCKER_ENGINE_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sn::docker {

struct HttpResponse {
  int status = 0;            // HTTP status code, e.g. 200
  std::string content_type;  // the Content-Type header, empty when absent
  std::string body;          // the complete (de-chunked) body
};

// Why a request produced no HTTP response. Carried as the error status's typed cause
// (common/error_cause.h: the §7 code it means, the failure's name as detail) on what
// DockerEngine::Request returns, so callers classify without parsing messages.
enum class TransportFailure {
  kSocketMissing,      // connect(): ENOENT / ENOTDIR — no daemon socket at the path
  kConnectionRefused,  // connect(): ECONNREFUSED — a stale socket, nobody listening
  kPermissionDenied,   // connect(): EACCES / EPERM — the socket refuses this process
  kTimeout,            // the request's deadline passed (connect, write or read)
  kMalformedResponse,  // the peer answered something that is not a valid HTTP/1.1 response
  kResponseTooLarge,   // the response body exceeded the caller's limit
  kIo,                 // any other socket error (reset, broken pipe, ...)
};

std::string_view TransportFailureName(TransportFailure f);

// Builds the error status for `f`; `detail` is for logs only (it may name paths).
absl::Status TransportError(TransportFailure f, std::string_view detail);

// The failure carried by `s`, or nullopt when `s` is OK or was not made by TransportError.
std::optional<TransportFailure> GetTransportFailure(const absl::Status& s);

struct RequestOptions {
  absl::Duration timeout = absl::Seconds(5);   // for the whole exchange
  size_t max_response_bytes = 8 * 1024 * 1024;  // body limit
  std::string content_type = "application/json";  // of a non-empty request body
  // When set, a 2xx response's body is passed to it chunk by chunk instead of being stored in
  // HttpResponse::body (max_response_bytes does not apply); returning false stops reading
  // and the request still succeeds with what was delivered. Other answers are stored.
  std::function<bool(std::string_view)> body_sink;
  // A request body in pieces, sent in order and never joined into one buffer (write_file's
  // archive: tar header, the caller's content, padding and trailer). When non-empty,
  // Request's `body` must be empty. The pieces must outlive the call.
  std::vector<std::string_view> body_parts;
  // A request body read from a source, `body_source_size` bytes exactly, streamed 64 KiB at a
  // time and never held whole (an image archive for /images/load). The source returns the
  // bytes it wrote into the buffer (0 before the size: an error). When set, `body` and
  // `body_parts` must be empty.
  std::function<absl::StatusOr<size_t>(char* buf, size_t n)> body_source;
  uint64_t body_source_size = 0;
};

class DockerEngine {
 public:
  virtual ~DockerEngine() = default;

  // Performs one HTTP request (`method` "GET"/"POST"/..., `target` like "/v1.41/info",
  // `body` sent as application/json when non-empty) and returns the daemon's response,
  // whatever its status code. Errors are TransportError statuses.
  // Thread-safe: concurrent calls use separate connections.
  virtual absl::StatusOr<HttpResponse> Request(std::string_view method, std::string_view target,
                                               std::string_view body,
                                               const RequestOptions& options) = 0;

  // A hijacked exchange (Docker's attach/exec start): sends the request with
  // "Connection: Upgrade, Upgrade: tcp"; on 101 (or 200) writes `input`, half-closes the
  // write side when `close_input` (the process sees EOF on stdin), then passes every raw
  // byte the daemon sends to `sink` until EOF. `sink` returns false to stop reading early.
  // A non-101/200 answer is returned as an HttpResponse with its (bounded) body and no
  // stream; on success the returned HttpResponse has the status and an empty body.
  // Errors are TransportError statuses; `options.timeout` bounds the whole exchange.
  virtual absl::StatusOr<HttpResponse> Hijack(std::string_view method, std::string_view target,
                                              std::string_view body, std::string_view input,
                                              bool close_input,
                                              const std::function<bool(std::string_view)>& sink,
                                              const RequestOptions& options) = 0;
};

}  // namespace sn::docker

#endif  // SANDBOX_NODE_PRIVHELPER_DOCKER_ENGINE_H_

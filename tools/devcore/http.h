// devcore's transport-free HTTP exchange: the request facts the routes read, the response
// they produce (a string body, or a file range the transport streams), and helpers shared by
// the route files. server.h adapts Beast to these.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_HTTP_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_HTTP_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sn::devcore {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // path and query, as received
  std::string authorization;  // the Authorization header, empty when absent
  std::string body;
  bool peer_loopback = false;  // the TCP peer is a loopback address
  std::string range;           // the Range header, empty when absent
  std::string if_range;        // the If-Range header, empty when absent
};

// `length` bytes of an open regular file from `offset`: a response body the transport
// streams (a release artifact may be 64 MiB; it is never held in memory). Owns `fd`.
struct FileBody {
  FileBody(int fd, uint64_t offset, uint64_t length) : fd(fd), offset(offset), length(length) {}
  ~FileBody();
  FileBody(const FileBody&) = delete;
  FileBody& operator=(const FileBody&) = delete;
  const int fd;
  const uint64_t offset;
  const uint64_t length;
  // Test-only fault (ReleaseRoutes::CutNext): the transport stops after this many body bytes
  // and drops the connection, as a network failure mid-download would.
  uint64_t cut_after = std::numeric_limits<uint64_t>::max();
};

struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int status, std::string content_type, std::string body)
      : status(status), content_type(std::move(content_type)), body(std::move(body)) {}
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers
  // When set, the body is this file range (and `body` is unused).
  std::shared_ptr<const FileBody> file;
};

// Helpers shared by the route files.
HttpResponse JsonError(int status, std::string_view message);
// "Bearer <token>" -> token; nullopt when malformed.
std::optional<std::string> BearerToken(std::string_view authorization);
// The value of `key` in the query of `target`; nullopt when absent or repeated.
std::optional<std::string> QueryParam(std::string_view target, std::string_view key);
// The path of `target` (before '?').
std::string_view TargetPath(std::string_view target);

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_HTTP_H_

// The agent's local HTTP listeners, on its event loop: `GET /metrics` (docs/operator-guide.md,
// "Metrics"; docs/security.md, "Metrics"), the exposition AgentMetrics renders, and the status
// socket `agent status` reads (`GET /status` in the state directory, 0600). Bounded: at most
// kMaxConnections at once (a further one is closed at accept), 8 KiB of request, 5 s to read
// it and 5 s to write the answer, one request per connection. Any other path is 404, any other
// method 405. No authentication: it listens on loopback or a unix socket (mode 0660, the
// agent's group) unless the configuration says otherwise, and what it serves holds no secret.
#ifndef SANDBOX_NODE_AGENT_METRICS_METRICS_SERVER_H_
#define SANDBOX_NODE_AGENT_METRICS_METRICS_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/state/config.h"

namespace boost::asio {
class io_context;
}

namespace sn::agent {

inline constexpr int kMaxMetricsConnections = 4;
inline constexpr size_t kMaxMetricsRequestBytes = 8 * 1024;
inline constexpr int kMetricsIoSeconds = 5;

// One path a listener answers: GET `path` is 200 with `content_type` and `render()`.
struct LocalRoute {
  std::string path;
  std::string content_type;
  std::function<std::string()> render;
};

inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

class MetricsServer {
 public:
  // Listens at `where` and serves `routes` on `io`'s thread (any other path is 404). A unix
  // socket gets `socket_mode`, replaces a stale one (no listener behind it) and refuses a live
  // one or any other file at that path.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      boost::asio::io_context& io, const MetricsListen& where, std::vector<LocalRoute> routes,
      int socket_mode = 0660,
      std::chrono::milliseconds io_timeout = std::chrono::seconds(kMetricsIoSeconds));
  // The metrics listener: GET /metrics only.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(boost::asio::io_context& io,
                                                              const MetricsListen& where,
                                                              std::function<std::string()> render) {
    return Start(io, where, {{"/metrics", kExpositionContentType, std::move(render)}});
  }
  // REQUIRES: destroyed on `io`'s thread or once `io` stopped running (its accept handler runs
  // there and must not race the destructor).
  virtual ~MetricsServer() = default;
  // Where it listens: the socket path, or "IP:port" with the port bound (port 0 resolved).
  virtual std::string address() const = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_METRICS_METRICS_SERVER_H_

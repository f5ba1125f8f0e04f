// devcore: Core's side of the node protocol for development and tests. This class is the
// transport-free heart of the server: the HTTP routes of spec §6 and the admin API as
// request -> response functions, and the registry of node connections (one per node: a
// second upgrade while one is opening, live or closing answers 409). server.h adapts Beast.
//
// REQUIRES (thread): every method runs on devcore's one event-loop thread.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_DEVCORE_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_DEVCORE_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "tools/devcore/node_store.h"
#include "tools/devcore/session.h"
#include "tools/devcore/specification.h"

namespace sn::devcore {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // path and query, as received
  std::string authorization;  // the Authorization header, empty when absent
  std::string body;
  bool peer_loopback = false;  // the TCP peer is a loopback address
};

struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int status, std::string content_type, std::string body)
      : status(status), content_type(std::move(content_type)), body(std::move(body)) {}
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers
};

class Devcore;

// A node connection that holds its node's slot until destroyed. Owned by the transport.
class Connection {
 public:
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Session& session() { return session_; }

 private:
  friend class Devcore;
  Connection(Devcore* devcore, SessionEnv env, SessionTransport* transport,
             std::string node_id, std::string credential);
  Devcore* devcore_;
  Session session_;
};

class Devcore {
 public:
  // `target`: the current specification (already published), or nullopt.
  // REQUIRES: `clock` and `timers` outlive this object.
  Devcore(std::unique_ptr<NodeStore> store, std::optional<Specification> target,
          const Clock* clock, TimerQueue* timers);
  ~Devcore();

  // True when `target` (path and query) is the WebSocket connect route.
  static bool IsConnectTarget(std::string_view target);
  // The largest request body `target` accepts: provider requests carry up to a frame's size.
  static size_t MaxBodyBytes(std::string_view target);

  // The connect route's checks before the upgrade is accepted:
  //   Unauthenticated (answer 401): missing or malformed node_id or Authorization, unknown
  //     node, wrong or revoked credential.
  //   AlreadyExists (answer 409): a connection of this node is opening, live or closing.
  // On success the returned Connection holds the node's slot; call session().Start() once the
  // upgrade is accepted.
  absl::StatusOr<std::unique_ptr<Connection>> OpenConnection(const HttpRequest& req,
                                                             SessionTransport* transport);

  // Every other route. `done` runs exactly once, possibly later (on this thread).
  void HandleHttp(const HttpRequest& req, std::function<void(HttpResponse)> done);

  NodeStore& store() { return *store_; }
  // The node's connection, or null.
  Session* FindSession(std::string_view node_id);

 private:
  friend class Connection;
  HttpResponse Enroll(const HttpRequest& req);
  HttpResponse Configuration(const HttpRequest& req);
  void HandleAdmin(const HttpRequest& req, std::function<void(HttpResponse)> done);
  HttpResponse ListNodes();
  HttpResponse BumpOwnerEpoch(const std::string& node_id);
  HttpResponse RevokeCredential(const std::string& node_id);
  void SendRequest(const std::string& node_id, const std::string& body,
                   std::function<void(HttpResponse)> done);

  std::unique_ptr<NodeStore> store_;
  std::optional<Specification> target_;
  const Clock* clock_;
  TimerQueue* timers_;
  std::map<std::string, Connection*, std::less<>> connections_;
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

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_DEVCORE_H_

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
#include "common/wire/limits.h"
#include "tools/devcore/http.h"
#include "tools/devcore/node_store.h"
#include "tools/devcore/releases.h"
#include "tools/devcore/session.h"
#include "tools/devcore/specification.h"

namespace sn::devcore {

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
  // `generations` holds every specification devcore serves; its current() generation is what
  // enroll hands out (503 without one). `releases_dir`: the §6 release routes' directory
  // ("" serves none; then every generation POSTed is refused, having no release to check).
  // REQUIRES: `clock` and `timers` outlive this object.
  Devcore(std::unique_ptr<NodeStore> store, std::unique_ptr<GenerationStore> generations,
          std::string releases_dir, const Clock* clock, TimerQueue* timers);
  ~Devcore();

  // Runs `work` away from the event loop, then `then` on the loop thread (each exactly once,
  // in that order; successive calls' `then`s in call order).
  using Offload = std::function<void(std::function<void()> work, std::function<void()> then)>;
  // Where the heavy, pure part of a provider request runs (parsing and checking its body: a
  // 64 MiB write_file takes seconds of CPU that would otherwise hold every node's frames,
  // heartbeat acks included, past the node's 35 s idle bound on a loaded machine). Without
  // one, both run inline (tests). REQUIRES: set before the first request.
  void SetOffload(Offload offload) { offload_ = std::move(offload); }

  // True when `target` (path and query) is the WebSocket connect route.
  static bool IsConnectTarget(std::string_view target);
  // The largest request body `target` accepts: provider requests carry up to a frame's size.
  static size_t MaxBodyBytes(std::string_view target);
  // The largest body any route accepts (the limit while a request's header is read: Beast
  // checks a Content-Length against the parser's body limit as it parses the header).
  static constexpr size_t kMaxAnyBodyBytes = wire::kMaxFrameBytes;

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
  GenerationStore& generations() { return *generations_; }
  const ReleaseRoutes& releases() const { return releases_; }
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
  // admin_generations.cc
  HttpResponse AddGeneration(const HttpRequest& req);
  HttpResponse ListGenerations();
  HttpResponse PutDeployment(const std::string& node_id, const HttpRequest& req);
  HttpResponse RecordDrop(const std::string& node_id, const HttpRequest& req);
  void SendRequest(const std::string& node_id, const std::string& body,
                   std::function<void(HttpResponse)> done);

  std::unique_ptr<NodeStore> store_;
  std::unique_ptr<GenerationStore> generations_;
  ReleaseRoutes releases_;
  const Clock* clock_;
  TimerQueue* timers_;
  std::map<std::string, Connection*, std::less<>> connections_;
  Offload offload_;
};

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_DEVCORE_H_

#include "tools/devcore/devcore.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/log.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"
#include "nlohmann/json.hpp"
#include "tools/devcore/deployment.h"

namespace sn::devcore {
namespace {

using json = nlohmann::json;

constexpr std::string_view kConnectPath = "/api/v1/sandbox-node/connect";
constexpr std::string_view kEnrollPath = "/api/v1/sandbox-node/enroll";
constexpr std::string_view kConfigurationPath = "/api/v1/sandbox-node/configuration";

// A positive int64 in canonical decimal (no sign, no leading zero).
std::optional<int64_t> ParsePositiveInt(std::string_view s) {
  if (s.empty() || s.size() > 19 || s[0] == '0') return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(absl::string_view(s.data(), s.size()), &v) || v <= 0) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

Connection::Connection(Devcore* devcore, SessionEnv env, SessionTransport* transport,
                       std::string node_id, std::string credential)
    : devcore_(devcore), session_(env, transport, std::move(node_id), std::move(credential)) {}

Connection::~Connection() {
  auto it = devcore_->connections_.find(session_.node_id());
  if (it != devcore_->connections_.end() && it->second == this) {
    devcore_->connections_.erase(it);
  }
}

Devcore::Devcore(std::unique_ptr<NodeStore> store, std::unique_ptr<GenerationStore> generations,
                 std::string releases_dir, const Clock* clock, TimerQueue* timers)
    : store_(std::move(store)),
      generations_(std::move(generations)),
      releases_(std::move(releases_dir)),
      clock_(clock),
      timers_(timers) {}

Devcore::~Devcore() = default;

bool Devcore::IsConnectTarget(std::string_view target) {
  return TargetPath(target) == kConnectPath;
}

size_t Devcore::MaxBodyBytes(std::string_view target) {
  const std::string_view path = TargetPath(target);
  const absl::string_view p(path.data(), path.size());
  if (absl::StartsWith(p, "/admin/v1/nodes/") && absl::EndsWith(p, "/requests")) {
    return wire::kMaxFrameBytes;
  }
  return wire::kMaxHttpBodyBytes;
}

Session* Devcore::FindSession(std::string_view node_id) {
  auto it = connections_.find(node_id);
  return it == connections_.end() ? nullptr : &it->second->session();
}

absl::StatusOr<std::unique_ptr<Connection>> Devcore::OpenConnection(
    const HttpRequest& req, SessionTransport* transport) {
  std::optional<std::string> node_id = QueryParam(req.target, "node_id");
  std::optional<std::string> credential = BearerToken(req.authorization);
  if (!node_id.has_value() || !credential.has_value() ||
      !store_->CredentialMatches(*node_id, *credential)) {
    return absl::UnauthenticatedError("credential rejected");
  }
  if (connections_.contains(*node_id)) {
    return absl::AlreadyExistsError("a connection of this node is opening, live or closing");
  }
  SessionEnv env{store_.get(), generations_.get(), clock_, timers_};
  std::unique_ptr<Connection> conn(
      new Connection(this, env, transport, *node_id, *std::move(credential)));
  connections_.emplace(*node_id, conn.get());
  return conn;
}

void Devcore::HandleHttp(const HttpRequest& req, std::function<void(HttpResponse)> done) {
  const std::string_view path = TargetPath(req.target);
  if (absl::StartsWith(absl::string_view(path.data(), path.size()), "/admin/")) {
    HandleAdmin(req, std::move(done));
    return;
  }
  if (ReleaseRoutes::Matches(path)) {
    done(releases_.Handle(req));
  } else if (path == kEnrollPath) {
    done(req.method == "POST" ? Enroll(req) : JsonError(405, "method not allowed"));
  } else if (path == kConfigurationPath) {
    done(req.method == "GET" ? Configuration(req) : JsonError(405, "method not allowed"));
  } else if (path == kConnectPath) {
    done(JsonError(426, "WebSocket upgrade required"));
  } else {
    done(JsonError(404, "no such route"));
  }
}

HttpResponse Devcore::Enroll(const HttpRequest& req) {
  const Specification* target = generations_->current();
  if (target == nullptr) {
    return JsonError(503, "devcore has no specification: start it with --specification=FILE");
  }
  absl::StatusOr<wire::EnrollRequest> body = wire::DecodeEnrollRequest(req.body);
  if (!body.ok()) return JsonError(400, std::string(body.status().message()));
  if (body->provider != target->provider) {
    return JsonError(400, "provider does not match the current specification's provider");
  }
  NodeRecord node;
  node.installation_id = body->installation_id;
  node.provider = body->provider;
  node.backend_fingerprint = body->backend_fingerprint;
  node.deployment_generation = target->generation;
  node.specification_digest = target->digest;
  node.generation_management = body->generation_management;
  node.max_active = body->max_active;
  node.max_retained = body->max_retained;
  absl::StatusOr<NodeStore::Enrolled> enrolled = store_->Enroll(body->enrollment_token, node);
  if (absl::IsUnauthenticated(enrolled.status())) {
    return JsonError(401, std::string(enrolled.status().message()));
  }
  if (absl::IsAlreadyExists(enrolled.status())) {
    return JsonError(409, std::string(enrolled.status().message()));
  }
  if (!enrolled.ok()) {
    LogError("enroll failed", {{"error", std::string(enrolled.status().message())}});
    return JsonError(500, "cannot record the enrollment");
  }
  LogInfo("node enrolled", {{"node_id", enrolled->node_id},
                            {"installation_id", node.installation_id},
                            {"generation", node.deployment_generation}});
  wire::EnrollResponse resp;
  resp.node_id = enrolled->node_id;
  resp.credential = enrolled->credential;
  resp.deployment_generation = target->generation;
  resp.specification_digest = target->digest;
  resp.runtime_source = target->runtime_source;
  return HttpResponse{201, "application/json", wire::EncodeEnrollResponse(resp)};
}

HttpResponse Devcore::Configuration(const HttpRequest& req) {
  std::optional<std::string> credential = BearerToken(req.authorization);
  const NodeRecord* node =
      credential.has_value() ? store_->FindByCredential(*credential) : nullptr;
  if (node == nullptr) return JsonError(401, "credential rejected");
  std::optional<std::string> g = QueryParam(req.target, "generation");
  std::optional<int64_t> generation = g.has_value() ? ParsePositiveInt(*g) : std::nullopt;
  if (!generation.has_value()) return JsonError(400, "generation must be a positive integer");
  if (!AnnouncedDigest(*node, *generations_, *generation).has_value()) {
    return JsonError(404, "generation never announced to this node");
  }
  const Specification* spec = generations_->Find(*generation);
  if (spec == nullptr) return JsonError(404, "specification not kept");
  return HttpResponse{200, "application/json", spec->bytes};
}

}  // namespace sn::devcore

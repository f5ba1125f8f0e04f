// The admin API of devcore (loopback peers only): enrollment tokens, the node list, owner
// epoch bumps, credential revocation and provider requests. The generation routes
// (generations, deployment, drops) are in admin_generations.cc.
#include <memory>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "common/wire/limits.h"
#include "nlohmann/json.hpp"
#include "tools/devcore/deployment.h"
#include "tools/devcore/devcore.h"

namespace sn::devcore {
namespace {

using json = nlohmann::json;

json ParsedOrNull(const std::optional<std::string>& text) {
  if (!text.has_value()) return nullptr;
  json j = json::parse(*text, nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

}  // namespace

void Devcore::HandleAdmin(const HttpRequest& req, std::function<void(HttpResponse)> done) {
  if (!req.peer_loopback) {
    done(JsonError(403, "the admin API answers loopback peers only"));
    return;
  }
  const std::string_view path = TargetPath(req.target);
  if (path == "/admin/v1/enrollment-tokens") {
    if (req.method != "POST") return done(JsonError(405, "method not allowed"));
    absl::StatusOr<std::string> token = store_->IssueEnrollmentToken();
    if (!token.ok()) return done(JsonError(500, "cannot record the token"));
    return done(HttpResponse{201, "application/json", json{{"token", *token}}.dump()});
  }
  if (path == "/admin/v1/nodes") {
    if (req.method != "GET") return done(JsonError(405, "method not allowed"));
    return done(ListNodes());
  }
  // Test-only release knobs (releases.h): the next response of one artifact breaks after N
  // body bytes; what nodes asked of the artifact routes.
  if (path == "/admin/v1/release-faults") {
    if (req.method != "POST") return done(JsonError(405, "method not allowed"));
    json j = json::parse(req.body, nullptr, false);
    if (!j.is_object() || j.size() != 2 || !j.contains("path") || !j["path"].is_string() ||
        !j.contains("cut_after_bytes") || !j["cut_after_bytes"].is_number_unsigned()) {
      return done(JsonError(400, "the body must be {path, cut_after_bytes}"));
    }
    releases_.CutNext(j["path"].get<std::string>(), j["cut_after_bytes"].get<uint64_t>());
    return done(HttpResponse{200, "application/json", j.dump()});
  }
  if (path == "/admin/v1/release-requests") {
    if (req.method != "GET") return done(JsonError(405, "method not allowed"));
    json list = json::array();
    for (const ReleaseRoutes::ArtifactRequest& r : releases_.artifact_requests()) {
      list.push_back({{"path", r.path}, {"range", r.range}, {"status", r.status}, {"cut", r.cut}});
    }
    return done(HttpResponse{200, "application/json", json{{"requests", list}}.dump()});
  }
  if (path == "/admin/v1/generations") {
    if (req.method == "POST") return done(AddGeneration(req));
    if (req.method == "GET") return done(ListGenerations());
    return done(JsonError(405, "method not allowed"));
  }
  // /admin/v1/nodes/{node_id}/{action}
  std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(path.data(), path.size()), '/');
  // "", "admin", "v1", "nodes", id, action
  if (parts.size() != 6 || parts[1] != "admin" || parts[2] != "v1" || parts[3] != "nodes") {
    return done(JsonError(404, "no such route"));
  }
  const std::string& node_id = parts[4];
  const std::string& action = parts[5];
  const char* method = nullptr;
  if (action == "owner-epoch" || action == "revoke-credential" || action == "requests" ||
      action == "drops") {
    method = "POST";
  } else if (action == "deployment") {
    method = "PUT";
  } else {
    return done(JsonError(404, "no such route"));
  }
  if (req.method != method) return done(JsonError(405, "method not allowed"));
  if (store_->Find(node_id) == nullptr) return done(JsonError(404, "unknown node"));
  if (action == "owner-epoch") return done(BumpOwnerEpoch(node_id));
  if (action == "requests") return SendRequest(node_id, req.body, std::move(done));
  if (action == "deployment") return done(PutDeployment(node_id, req));
  if (action == "drops") return done(RecordDrop(node_id, req));
  return done(RevokeCredential(node_id));
}

void Devcore::SendRequest(const std::string& node_id, const std::string& body,
                          std::function<void(HttpResponse)> done) {
  auto prepared = std::make_shared<std::variant<PreparedRequest, RequestOutcome>>();
  // One copy on the loop (a memcpy: milliseconds for 64 MiB); `body` is the transport's.
  auto work = [prepared, text = std::make_shared<const std::string>(body)] {
    *prepared = PrepareRequestBody(*text);
  };
  auto then = [this, prepared, node_id, done = std::move(done)]() mutable {
    if (auto* error = std::get_if<RequestOutcome>(prepared.get())) {
      return done(HttpResponse(error->http_status, "application/json", std::move(error->body)));
    }
    Session* s = FindSession(node_id);
    if (s == nullptr || !s->live()) return done(JsonError(409, "the node is not connected"));
    s->SendRequest(std::get<PreparedRequest>(std::move(*prepared)),
                   [done = std::move(done)](RequestOutcome o) {
                     HttpResponse r(o.http_status, "application/json", std::move(o.body));
                     if (o.node_round_trip.has_value()) {
                       r.headers.emplace_back(
                           "Sn-Node-Round-Trip-Us",
                           std::to_string(absl::ToInt64Microseconds(*o.node_round_trip)));
                     }
                     done(std::move(r));
                   });
  };
  if (!offload_) {
    work();
    return then();
  }
  offload_(std::move(work), std::move(then));
}

HttpResponse Devcore::ListNodes() {
  json nodes = json::array();
  for (const NodeRecord* r : store_->Nodes()) {
    Session* s = FindSession(r->node_id);
    const bool connected = s != nullptr && s->live();
    const NodeRuntime* rt = store_->FindRuntime(r->node_id);
    json n = {{"node_id", r->node_id},
              {"installation_id", r->installation_id},
              {"provider", r->provider},
              {"backend_fingerprint", r->backend_fingerprint},
              {"deployment_generation", r->deployment_generation},
              {"specification_digest", r->specification_digest},
              {"generation_management", r->generation_management},
              {"max_active", r->max_active},
              {"max_retained", r->max_retained},
              {"presence", connected ? "connected" : "disconnected"},
              {"connection_id", connected ? json(s->connection_id()) : json(nullptr)},
              {"owner_epoch", r->owner_epoch},
              {"credential_revoked", r->credential_sha256.empty()},
              {"last_health", rt != nullptr ? ParsedOrNull(rt->last_health_json) : nullptr},
              {"last_seen_at", rt != nullptr && rt->last_seen_at.has_value()
                                   ? json(*rt->last_seen_at)
                                   : json(nullptr)},
              {"heartbeats", rt != nullptr ? rt->heartbeats : 0}};
    n["deployment"] = nullptr;
    if (r->generation_management) {
      n["last_generations"] =
          rt != nullptr ? ParsedOrNull(rt->last_generations_json) : json(nullptr);
      if (std::optional<wire::Deployment> d = DeploymentFor(*r, *generations_)) {
        n["deployment"] = {{"generation", d->generation},
                           {"specification_digest", d->specification_digest},
                           {"serving_generation", d->serving_generation.has_value()
                                                      ? json(*d->serving_generation)
                                                      : json(nullptr)},
                           {"recorded", r->deployment.has_value()}};
      }
      n["announced_generations"] = r->announced_generations;
      json dropped = json::array();
      for (const GenerationRef& g : r->dropped) {
        dropped.push_back({{"generation", g.generation},
                           {"specification_digest", g.specification_digest}});
      }
      n["dropped"] = std::move(dropped);
    }
    nodes.push_back(std::move(n));
  }
  return HttpResponse{200, "application/json", json{{"nodes", std::move(nodes)}}.dump()};
}

HttpResponse Devcore::BumpOwnerEpoch(const std::string& node_id) {
  absl::StatusOr<int64_t> epoch = store_->BumpOwnerEpoch(node_id);
  if (!epoch.ok()) return JsonError(500, "cannot record the owner epoch");
  LogInfo("owner epoch bumped", {{"node_id", node_id}, {"owner_epoch", *epoch}});
  // Ownership never changes inside a connection: Core changes owners by closing it (§3).
  if (Session* s = FindSession(node_id)) {
    s->CloseWith(wire::kCloseEpochMismatch, "owner epoch changed");
  }
  return HttpResponse{200, "application/json", json{{"owner_epoch", *epoch}}.dump()};
}

HttpResponse Devcore::RevokeCredential(const std::string& node_id) {
  absl::Status st = store_->RevokeCredential(node_id);
  if (!st.ok()) return JsonError(500, "cannot record the revocation");
  LogInfo("node credential revoked", {{"node_id", node_id}});
  // The live connection learns it at its next heartbeat (4004), as a real Core would.
  return HttpResponse{200, "application/json", json{{"credential_revoked", true}}.dump()};
}

}  // namespace sn::devcore

// devcore's generation admin routes (issues 9 and 10; tools/devcore/README.md):
//   POST /admin/v1/generations               a specification document -> held generation
//   GET  /admin/v1/generations               the held generations
//   PUT  /admin/v1/nodes/{id}/deployment     a node's target and serving generation
//   POST /admin/v1/nodes/{id}/drops          a drop grant for one (generation, digest) pair
// Every change is durable (node_store.h, specification.h) before it is answered.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/release/verify.h"
#include "nlohmann/json.hpp"
#include "tools/devcore/admin_bodies.h"
#include "tools/devcore/deployment.h"
#include "tools/devcore/devcore.h"

namespace sn::devcore {
namespace {

using json = nlohmann::json;

HttpResponse Json(int status, const json& body) {
  return HttpResponse{status, "application/json", body.dump()};
}

json ServingJson(const std::optional<int64_t>& serving) {
  return serving.has_value() ? json(*serving) : json(nullptr);
}

}  // namespace

HttpResponse Devcore::AddGeneration(const HttpRequest& req) {
  absl::StatusOr<Specification> spec = ParseSpecification(req.body);
  if (!spec.ok()) return JsonError(400, std::string(spec.status().message()));
  const json answer = {{"generation", spec->generation},
                       {"specification_digest", spec->digest}};
  if (const Specification* held = generations_->Find(spec->generation)) {
    if (held->bytes == spec->bytes) return Json(200, answer);
    return JsonError(409, absl::StrCat("generation ", spec->generation,
                                       " is held with other bytes; a generation's "
                                       "specification never changes"));
  }
  absl::StatusOr<wire::ReleaseManifest> manifest = releases_.Manifest(spec->runtime_source);
  if (absl::IsNotFound(manifest.status())) {
    return JsonError(400, absl::StrCat("release ", spec->runtime_source,
                                       " is not served by devcore (--releases-dir)"));
  }
  if (!manifest.ok()) return JsonError(400, std::string(manifest.status().message()));
  absl::Status matches = release::CheckSpecificationAgainstManifest(spec->document, *manifest);
  if (!matches.ok()) return JsonError(400, std::string(matches.message()));
  absl::StatusOr<GenerationStore::Added> added = generations_->Add(*spec);
  if (absl::IsAlreadyExists(added.status())) return JsonError(409, std::string(added.status().message()));
  if (!added.ok()) {
    LogError("cannot keep a specification", {{"error", std::string(added.status().message())}});
    return JsonError(500, "cannot keep the specification");
  }
  LogInfo("generation added", {{"generation", spec->generation},
                               {"specification_digest", spec->digest},
                               {"runtime_source", spec->runtime_source}});
  return Json(*added == GenerationStore::Added::kCreated ? 201 : 200, answer);
}

HttpResponse Devcore::ListGenerations() {
  json list = json::array();
  const Specification* current = generations_->current();
  for (const Specification* s : generations_->All()) {
    list.push_back({{"generation", s->generation},
                    {"specification_digest", s->digest},
                    {"provider", s->provider},
                    {"runtime_source", s->runtime_source},
                    {"current", current == s}});
  }
  return Json(200, {{"generations", std::move(list)}});
}

HttpResponse Devcore::PutDeployment(const std::string& node_id, const HttpRequest& req) {
  const NodeRecord* node = store_->Find(node_id);
  absl::StatusOr<DeploymentRecord> d = DecodeDeploymentBody(req.body);
  if (!d.ok()) return JsonError(400, std::string(d.status().message()));
  if (!node->generation_management) {
    return JsonError(409, "the node has no generation management: it serves only its "
                          "enrolled generation");
  }
  std::optional<int64_t> named[] = {d->generation, d->serving_generation};
  for (const std::optional<int64_t>& g : named) {
    if (!g.has_value()) continue;
    const Specification* spec = generations_->Find(*g);
    if (spec == nullptr) {
      return JsonError(400, absl::StrCat("devcore does not hold generation ", *g,
                                         " (POST /admin/v1/generations)"));
    }
    if (spec->provider != node->provider) {
      return JsonError(400, absl::StrCat("generation ", *g, " is for provider ",
                                         spec->provider, ", the node's is ", node->provider));
    }
    if (IsDropped(*node, GenerationRef{*g, spec->digest})) {
      return JsonError(409, absl::StrCat("generation ", *g,
                                         " is recorded as dropped for this node"));
    }
  }
  absl::Status st = store_->SetDeployment(node_id, *d);
  if (!st.ok()) {
    LogError("cannot record a deployment", {{"node_id", node_id},
                                            {"error", std::string(st.message())}});
    return JsonError(500, "cannot record the deployment");
  }
  LogInfo("deployment recorded",
          {{"node_id", node_id},
           {"generation", d->generation},
           {"serving_generation",
            d->serving_generation.has_value() ? std::to_string(*d->serving_generation)
                                              : std::string("null")}});
  return Json(200, {{"generation", d->generation},
                    {"specification_digest", generations_->Find(d->generation)->digest},
                    {"serving_generation", ServingJson(d->serving_generation)}});
}

HttpResponse Devcore::RecordDrop(const std::string& node_id, const HttpRequest& req) {
  const NodeRecord* node = store_->Find(node_id);
  absl::StatusOr<GenerationRef> drop = DecodeDropBody(req.body);
  if (!drop.ok()) return JsonError(400, std::string(drop.status().message()));
  if (!node->generation_management) {
    return JsonError(409, "the node has no generation management: nothing is dropped");
  }
  if (AnnouncedDigest(*node, *generations_, drop->generation) != drop->specification_digest) {
    return JsonError(400, absl::StrCat("devcore never announced generation ", drop->generation,
                                       " with this digest to the node"));
  }
  if (std::optional<wire::Deployment> d = DeploymentFor(*node, *generations_)) {
    if (d->generation == drop->generation || d->serving_generation == drop->generation) {
      return JsonError(409, absl::StrCat("generation ", drop->generation,
                                         " is the node's target or serving generation"));
    }
  } else {
    return JsonError(500, "the node's deployment names a generation devcore does not hold");
  }
  absl::Status st = store_->RecordDrop(node_id, *drop);
  if (!st.ok()) {
    LogError("cannot record a drop", {{"node_id", node_id}, {"error", std::string(st.message())}});
    return JsonError(500, "cannot record the drop");
  }
  LogInfo("drop recorded", {{"node_id", node_id}, {"generation", drop->generation}});
  return Json(200, {{"generation", drop->generation},
                    {"specification_digest", drop->specification_digest},
                    {"dropped", true}});
}

}  // namespace sn::devcore

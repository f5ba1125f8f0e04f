#include "privhelper/store/plan.h"

#include "absl/strings/str_cat.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::privhelper::store {
namespace {

using json = nlohmann::json;

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Torn(std::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat("preparation plan: ", AV(why)));
}

bool Exactly(const json& o, std::initializer_list<const char*> names) {
  if (!o.is_object() || o.size() != names.size()) return false;
  for (const char* n : names) {
    if (!o.contains(n)) return false;
  }
  return true;
}

}  // namespace

bool Plan::SameAs(const Plan& o) const {
  Plan a = *this, b = o;
  a.import_started = b.import_started = false;
  return a == b;
}

std::string ArtifactPath(std::string_view source, std::string_view name) {
  return absl::StrCat("releases/", AV(source), "/", AV(name));
}

std::string EncodePlan(const Plan& p) {
  json artifacts = json::array();
  for (const PlannedArtifact& a : p.artifacts) {
    artifacts.push_back({{"name", a.name},
                         {"kind", a.kind},
                         {"sha256", a.sha256},
                         {"size", a.size},
                         {"path", a.path}});
  }
  json doc = {{"schema", 1},
              {"installation_id", p.installation_id},
              {"generation", p.generation},
              {"specification_digest", p.specification_digest},
              {"source", p.source},
              {"artifacts", artifacts},
              {"import_started", p.import_started}};
  return doc.dump() + "\n";
}

absl::StatusOr<Plan> DecodePlan(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded() ||
      !Exactly(doc, {"schema", "installation_id", "generation", "specification_digest", "source",
                     "artifacts", "import_started"})) {
    return Torn("not the expected object");
  }
  if (doc["schema"] != 1 || !doc["installation_id"].is_string() ||
      !doc["generation"].is_number_integer() || !doc["specification_digest"].is_string() ||
      !doc["source"].is_string() || !doc["artifacts"].is_array() ||
      !doc["import_started"].is_boolean()) {
    return Torn("wrong member types");
  }
  Plan p;
  p.installation_id = doc["installation_id"].get<std::string>();
  p.generation = doc["generation"].get<int64_t>();
  p.specification_digest = doc["specification_digest"].get<std::string>();
  p.source = doc["source"].get<std::string>();
  p.import_started = doc["import_started"].get<bool>();
  if (!wire::IsUuid(p.installation_id) || p.generation <= 0 ||
      !wire::IsDigest(p.specification_digest) || !wire::IsReleaseSource(p.source)) {
    return Torn("bad identity");
  }
  for (const json& a : doc["artifacts"]) {
    if (!Exactly(a, {"name", "kind", "sha256", "size", "path"}) || !a["name"].is_string() ||
        !a["kind"].is_string() || !a["sha256"].is_string() || !a["size"].is_number_integer() ||
        !a["path"].is_string()) {
      return Torn("bad artifact entry");
    }
    PlannedArtifact pa{a["name"].get<std::string>(), a["kind"].get<std::string>(),
                       a["sha256"].get<std::string>(), a["size"].get<int64_t>(),
                       a["path"].get<std::string>()};
    if (!wire::IsArtifactName(pa.name) || !wire::IsDigest(pa.sha256) || pa.size < 0 ||
        pa.path != ArtifactPath(p.source, pa.name)) {
      return Torn("bad artifact entry");
    }
    p.artifacts.push_back(std::move(pa));
  }
  return p;
}

}  // namespace sn::privhelper::store

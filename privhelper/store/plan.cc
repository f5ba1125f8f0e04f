#include "privhelper/store/plan.h"

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::privhelper::store {
namespace {

using json = nlohmann::json;
using sn::json::RecordObject;

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

absl::StatusOr<PlannedArtifact> TakeArtifact(RecordObject& o) {
  PlannedArtifact a;
  ASSIGN_OR_RETURN(a.name, o.String("name"));
  ASSIGN_OR_RETURN(a.kind, o.String("kind"));
  ASSIGN_OR_RETURN(a.sha256, o.String("sha256"));
  ASSIGN_OR_RETURN(a.size, o.Int("size"));
  ASSIGN_OR_RETURN(a.path, o.String("path"));
  RETURN_IF_ERROR(o.Finish());
  return a;
}

absl::Status CheckArtifact(const RecordObject& o, const PlannedArtifact& a,
                           std::string_view source) {
  if (!wire::IsArtifactName(a.name) || !wire::IsDigest(a.sha256) || a.size < 0 ||
      a.path != ArtifactPath(source, a.name)) {
    return o.Malformed("bad artifact entry");
  }
  return absl::OkStatus();
}

namespace {

// The record's rules; the codes of common/json/record.h.
absl::StatusOr<Plan> ReadPlan(std::string_view text) {
  ASSIGN_OR_RETURN(RecordObject doc, RecordObject::Parse(text, "preparation plan"));
  RETURN_IF_ERROR(doc.Schema(1));
  Plan p;
  ASSIGN_OR_RETURN(p.installation_id, doc.String("installation_id"));
  ASSIGN_OR_RETURN(p.generation, doc.Int("generation"));
  ASSIGN_OR_RETURN(p.specification_digest, doc.String("specification_digest"));
  ASSIGN_OR_RETURN(p.source, doc.String("source"));
  ASSIGN_OR_RETURN(std::vector<RecordObject> artifacts, doc.Objects("artifacts"));
  ASSIGN_OR_RETURN(p.import_started, doc.Bool("import_started"));
  RETURN_IF_ERROR(doc.Finish());
  if (!wire::IsUuid(p.installation_id) || p.generation <= 0 ||
      !wire::IsDigest(p.specification_digest) || !wire::IsReleaseSource(p.source)) {
    return doc.Malformed("bad identity");
  }
  for (RecordObject& o : artifacts) {
    ASSIGN_OR_RETURN(PlannedArtifact a, TakeArtifact(o));
    RETURN_IF_ERROR(CheckArtifact(o, a, p.source));
    p.artifacts.push_back(std::move(a));
  }
  return p;
}

}  // namespace

absl::StatusOr<Plan> DecodePlan(std::string_view text) {
  absl::StatusOr<Plan> p = ReadPlan(text);
  if (!p.ok()) return sn::json::Recoded(p.status(), absl::StatusCode::kFailedPrecondition);
  return p;
}

}  // namespace sn::privhelper::store

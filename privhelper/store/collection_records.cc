#include "privhelper/store/collection_records.h"

#include "absl/strings/str_cat.h"
#include "common/json/record.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::privhelper::store {
namespace {

using json = nlohmann::json;
using sn::json::RecordObject;

bool IdentityOk(const std::string& installation, int64_t generation, const std::string& digest) {
  return wire::IsUuid(installation) && generation > 0 && wire::IsDigest(digest);
}

// The records' rules; the codes of common/json/record.h.
absl::StatusOr<CollectionJournal> ReadJournal(std::string_view text) {
  ASSIGN_OR_RETURN(RecordObject d, RecordObject::Parse(text, "collection journal"));
  RETURN_IF_ERROR(d.Schema(1));
  CollectionJournal j;
  ASSIGN_OR_RETURN(j.installation_id, d.String("installation_id"));
  ASSIGN_OR_RETURN(j.generation, d.Int("generation"));
  ASSIGN_OR_RETURN(j.specification_digest, d.String("specification_digest"));
  ASSIGN_OR_RETURN(j.source, d.String("source"));
  ASSIGN_OR_RETURN(j.import_started, d.Bool("import_started"));
  ASSIGN_OR_RETURN(std::vector<RecordObject> files, d.Objects("files"));
  ASSIGN_OR_RETURN(j.native_done, d.Bool("native_done"));
  RETURN_IF_ERROR(d.Finish());
  // A generation whose records name no release (a lease or specification alone) has no
  // source and no file to remove.
  if (!IdentityOk(j.installation_id, j.generation, j.specification_digest) ||
      (j.source.empty() ? !files.empty() : !wire::IsReleaseSource(j.source))) {
    return d.Malformed("bad identity or source");
  }
  for (RecordObject& o : files) {
    ASSIGN_OR_RETURN(PlannedArtifact f, TakeArtifact(o));
    RETURN_IF_ERROR(CheckArtifact(o, f, j.source));
    j.files.push_back(std::move(f));
  }
  return j;
}

absl::StatusOr<DroppedMarker> ReadMarker(std::string_view text) {
  ASSIGN_OR_RETURN(RecordObject d, RecordObject::Parse(text, "dropped marker"));
  RETURN_IF_ERROR(d.Schema(1));
  DroppedMarker m;
  ASSIGN_OR_RETURN(m.installation_id, d.String("installation_id"));
  ASSIGN_OR_RETURN(m.generation, d.Int("generation"));
  ASSIGN_OR_RETURN(m.specification_digest, d.String("specification_digest"));
  RETURN_IF_ERROR(d.Finish());
  if (!IdentityOk(m.installation_id, m.generation, m.specification_digest)) {
    return d.Malformed("bad identity");
  }
  return m;
}

}  // namespace

std::string CollectionJournalName(int64_t generation) {
  return absl::StrCat(generation, ".collecting");
}
std::string DroppedMarkerName(int64_t generation) { return absl::StrCat(generation, ".dropped"); }

std::string EncodeCollectionJournal(const CollectionJournal& j) {
  json files = json::array();
  for (const PlannedArtifact& a : j.files) {
    files.push_back({{"name", a.name},
                     {"kind", a.kind},
                     {"sha256", a.sha256},
                     {"size", a.size},
                     {"path", a.path}});
  }
  json doc = {{"schema", 1},
              {"installation_id", j.installation_id},
              {"generation", j.generation},
              {"specification_digest", j.specification_digest},
              {"source", j.source},
              {"import_started", j.import_started},
              {"files", files},
              {"native_done", j.native_done}};
  return doc.dump() + "\n";
}

absl::StatusOr<CollectionJournal> DecodeCollectionJournal(std::string_view text) {
  absl::StatusOr<CollectionJournal> j = ReadJournal(text);
  if (!j.ok()) return sn::json::Recoded(j.status(), absl::StatusCode::kFailedPrecondition);
  return j;
}

std::string EncodeDroppedMarker(const DroppedMarker& m) {
  json doc = {{"schema", 1},
              {"installation_id", m.installation_id},
              {"generation", m.generation},
              {"specification_digest", m.specification_digest}};
  return doc.dump() + "\n";
}

absl::StatusOr<DroppedMarker> DecodeDroppedMarker(std::string_view text) {
  absl::StatusOr<DroppedMarker> m = ReadMarker(text);
  if (!m.ok()) return sn::json::Recoded(m.status(), absl::StatusCode::kFailedPrecondition);
  return m;
}

}  // namespace sn::privhelper::store

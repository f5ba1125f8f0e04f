#include "privhelper/store/collection_records.h"

#include "absl/strings/str_cat.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::privhelper::store {
namespace {

using json = nlohmann::json;

bool Exactly(const json& o, std::initializer_list<const char*> names) {
  if (!o.is_object() || o.size() != names.size()) return false;
  for (const char* n : names) {
    if (!o.contains(n)) return false;
  }
  return true;
}

absl::Status Torn(const char* record) {
  return absl::FailedPreconditionError(absl::StrCat(record, ": torn or foreign record"));
}

bool IdentityOk(const std::string& installation, int64_t generation, const std::string& digest) {
  return wire::IsUuid(installation) && generation > 0 && wire::IsDigest(digest);
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
  json d = json::parse(text.begin(), text.end(), nullptr, false);
  if (d.is_discarded() ||
      !Exactly(d, {"schema", "installation_id", "generation", "specification_digest", "source",
                   "import_started", "files", "native_done"}) ||
      d["schema"] != 1 || !d["installation_id"].is_string() ||
      !d["generation"].is_number_integer() || !d["specification_digest"].is_string() ||
      !d["source"].is_string() || !d["import_started"].is_boolean() || !d["files"].is_array() ||
      !d["native_done"].is_boolean()) {
    return Torn("collection journal");
  }
  CollectionJournal j;
  j.installation_id = d["installation_id"].get<std::string>();
  j.generation = d["generation"].get<int64_t>();
  j.specification_digest = d["specification_digest"].get<std::string>();
  j.source = d["source"].get<std::string>();
  j.import_started = d["import_started"].get<bool>();
  j.native_done = d["native_done"].get<bool>();
  // A generation whose records name no release (a lease or specification alone) has no
  // source and no file to remove.
  if (!IdentityOk(j.installation_id, j.generation, j.specification_digest) ||
      (j.source.empty() ? !d["files"].empty() : !wire::IsReleaseSource(j.source))) {
    return Torn("collection journal");
  }
  for (const json& a : d["files"]) {
    if (!Exactly(a, {"name", "kind", "sha256", "size", "path"}) || !a["name"].is_string() ||
        !a["kind"].is_string() || !a["sha256"].is_string() || !a["size"].is_number_integer() ||
        !a["path"].is_string()) {
      return Torn("collection journal");
    }
    PlannedArtifact f{a["name"].get<std::string>(), a["kind"].get<std::string>(),
                      a["sha256"].get<std::string>(), a["size"].get<int64_t>(),
                      a["path"].get<std::string>()};
    if (!wire::IsArtifactName(f.name) || !wire::IsDigest(f.sha256) || f.size < 0 ||
        f.path != ArtifactPath(j.source, f.name)) {
      return Torn("collection journal");
    }
    j.files.push_back(std::move(f));
  }
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
  json d = json::parse(text.begin(), text.end(), nullptr, false);
  if (d.is_discarded() ||
      !Exactly(d, {"schema", "installation_id", "generation", "specification_digest"}) ||
      d["schema"] != 1 || !d["installation_id"].is_string() ||
      !d["generation"].is_number_integer() || !d["specification_digest"].is_string()) {
    return Torn("dropped marker");
  }
  DroppedMarker m{d["installation_id"].get<std::string>(), d["generation"].get<int64_t>(),
                  d["specification_digest"].get<std::string>()};
  if (!IdentityOk(m.installation_id, m.generation, m.specification_digest)) {
    return Torn("dropped marker");
  }
  return m;
}

}  // namespace sn::privhelper::store

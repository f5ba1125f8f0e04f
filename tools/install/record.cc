#include "tools/install/record.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::install {
namespace {

using nlohmann::json;

absl::Status Torn(std::string_view what) {
  return absl::DataLossError(absl::StrCat("torn or foreign installer record: ", std::string(what)));
}

// Exactly the members `names` (optional ones may be absent).
absl::Status ExactMembers(const json& doc, const std::set<std::string>& required,
                          const std::set<std::string>& optional = {}) {
  if (!doc.is_object()) return Torn("not an object");
  for (const auto& [k, v] : doc.items()) {
    if (!required.count(k) && !optional.count(k)) return Torn(absl::StrCat("unknown member ", k));
    if (v.is_null()) return Torn(absl::StrCat("null member ", k));
  }
  for (const std::string& k : required) {
    if (!doc.contains(k)) return Torn(absl::StrCat("missing member ", k));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Str(const json& doc, const char* name) {
  if (!doc.at(name).is_string()) return Torn(absl::StrCat(name, " is not a string"));
  return doc.at(name).get<std::string>();
}

bool IsDigest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

json ArtifactJson(const wire::RuntimeArtifact& a) {
  return json{{"name", a.name}, {"kind", a.kind}, {"sha256", a.sha256}, {"size", a.size}};
}

}  // namespace

std::string EncodeInstallRecord(const InstallRecord& r) {
  json doc = {{"schema", 1},
              {"phase", r.phase == Phase::kEnrolled ? "enrolled" : "installed"},
              {"core_origin", r.core_origin},
              {"host_source", r.host_source},
              {"host_manifest_sha256", r.host_manifest_sha256},
              {"installation_id", r.installation_id},
              {"provider", r.provider},
              {"generation_management", r.generation_management},
              {"agent_user", r.agent_user},
              {"node_id", r.node_id},
              {"deployment_generation", r.deployment_generation},
              {"specification_digest", r.specification_digest},
              {"runtime_source", r.runtime_source}};
  if (r.phase == Phase::kEnrolled) doc["credential"] = r.credential;
  return doc.dump() + "\n";
}

absl::StatusOr<InstallRecord> DecodeInstallRecord(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded()) return Torn("not JSON");
  absl::Status members =
      ExactMembers(doc,
                   {"schema", "phase", "core_origin", "host_source", "host_manifest_sha256",
                    "installation_id", "provider", "generation_management", "agent_user", "node_id",
                    "deployment_generation", "specification_digest", "runtime_source"},
                   {"credential"});
  if (!members.ok()) return members;
  if (doc["schema"] != 1) return Torn("schema is not 1");
  InstallRecord r;
  absl::StatusOr<std::string> phase = Str(doc, "phase");
  if (!phase.ok()) return phase.status();
  if (*phase == "enrolled") {
    r.phase = Phase::kEnrolled;
  } else if (*phase == "installed") {
    r.phase = Phase::kInstalled;
  } else {
    return Torn("phase is neither enrolled nor installed");
  }
  std::string* const strings[] = {
      &r.core_origin, &r.host_source, &r.host_manifest_sha256, &r.installation_id, &r.provider,
      &r.agent_user,  &r.node_id,     &r.specification_digest, &r.runtime_source};
  const char* const names[] = {
      "core_origin", "host_source", "host_manifest_sha256", "installation_id", "provider",
      "agent_user",  "node_id",     "specification_digest", "runtime_source"};
  for (size_t i = 0; i < std::size(names); ++i) {
    absl::StatusOr<std::string> v = Str(doc, names[i]);
    if (!v.ok()) return v.status();
    *strings[i] = *std::move(v);
  }
  if (!doc["generation_management"].is_boolean()) {
    return Torn("generation_management is not a boolean");
  }
  r.generation_management = doc["generation_management"].get<bool>();
  if (!doc["deployment_generation"].is_number_integer() ||
      doc["deployment_generation"].get<int64_t>() <= 0) {
    return Torn("deployment_generation is not a positive integer");
  }
  r.deployment_generation = doc["deployment_generation"].get<int64_t>();
  if (!wire::IsUuid(r.installation_id)) return Torn("installation_id is not a uuid");
  if (!wire::IsUuid(r.node_id)) return Torn("node_id is not a uuid");
  if (!IsDigest(r.host_manifest_sha256)) return Torn("host_manifest_sha256 is not a digest");
  if (!IsDigest(r.specification_digest)) return Torn("specification_digest is not a digest");
  if (!wire::IsReleaseSourceName(r.host_source)) return Torn("host_source is not a source");
  if (!wire::IsReleaseSourceName(r.runtime_source)) return Torn("runtime_source is not a source");
  if (r.agent_user.empty()) return Torn("agent_user is empty");
  const bool has_credential = doc.contains("credential");
  if (has_credential != (r.phase == Phase::kEnrolled)) {
    return Torn("a credential belongs to an enrolled record only");
  }
  if (has_credential) {
    absl::StatusOr<std::string> c = Str(doc, "credential");
    if (!c.ok()) return c.status();
    if (c->empty()) return Torn("credential is empty");
    r.credential = *std::move(c);
  }
  return r;
}

std::string EncodeChecksumRecord(const ChecksumRecord& r, bool runtime) {
  json files = json::array();
  for (const RecordedFile& f : r.files) {
    json entry = ArtifactJson(f.artifact);
    if (!runtime) entry["path"] = f.path;
    files.push_back(std::move(entry));
  }
  json doc = {{"schema", 1},
              {"source", r.source},
              {"manifest_sha256", r.manifest_sha256},
              {"files", std::move(files)}};
  if (runtime) {
    doc["generation"] = r.generation;
    doc["specification_digest"] = r.specification_digest;
    json images = json::array();
    for (const wire::SpecImage& i : r.images) {
      images.push_back({{"name", i.name}, {"artifact", i.artifact}, {"identities", i.identities}});
    }
    doc["images"] = std::move(images);
  }
  return doc.dump(1) + "\n";
}

absl::StatusOr<ChecksumRecord> DecodeChecksumRecord(std::string_view text, bool runtime) {
  json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded()) return Torn("not JSON");
  std::set<std::string> required = {"schema", "source", "manifest_sha256", "files"};
  if (runtime) {
    required.insert("generation");
    required.insert("specification_digest");
    required.insert("images");
  }
  absl::Status members = ExactMembers(doc, required);
  if (!members.ok()) return members;
  if (doc["schema"] != 1) return Torn("schema is not 1");
  ChecksumRecord r;
  absl::StatusOr<std::string> source = Str(doc, "source");
  if (!source.ok()) return source.status();
  r.source = *source;
  absl::StatusOr<std::string> sha = Str(doc, "manifest_sha256");
  if (!sha.ok()) return sha.status();
  r.manifest_sha256 = *sha;
  if (!IsDigest(r.manifest_sha256)) return Torn("manifest_sha256 is not a digest");
  if (runtime) {
    if (!doc["generation"].is_number_integer() || doc["generation"].get<int64_t>() <= 0) {
      return Torn("generation is not a positive integer");
    }
    r.generation = doc["generation"].get<int64_t>();
    absl::StatusOr<std::string> d = Str(doc, "specification_digest");
    if (!d.ok()) return d.status();
    if (!IsDigest(*d)) return Torn("specification_digest is not a digest");
    r.specification_digest = *d;
  }
  if (runtime) {
    if (!doc["images"].is_array()) return Torn("images is not an array");
    for (const json& i : doc["images"]) {
      absl::Status m = ExactMembers(i, {"name", "artifact", "identities"});
      if (!m.ok()) return m;
      wire::SpecImage image;
      absl::StatusOr<std::string> name = Str(i, "name");
      if (!name.ok()) return name.status();
      absl::StatusOr<std::string> artifact = Str(i, "artifact");
      if (!artifact.ok()) return artifact.status();
      image.name = *name;
      image.artifact = *artifact;
      if (!i["identities"].is_array()) return Torn("an image's identities is not an array");
      for (const json& id : i["identities"]) {
        if (!id.is_string()) return Torn("an image identity is not a string");
        image.identities.push_back(id.get<std::string>());
      }
      r.images.push_back(std::move(image));
    }
  }
  if (!doc["files"].is_array()) return Torn("files is not an array");
  for (const json& f : doc["files"]) {
    std::set<std::string> keys = {"name", "kind", "sha256", "size"};
    if (!runtime) keys.insert("path");
    absl::Status m = ExactMembers(f, keys);
    if (!m.ok()) return m;
    RecordedFile file;
    for (auto [member, out] :
         {std::pair{"name", &file.artifact.name}, std::pair{"kind", &file.artifact.kind},
          std::pair{"sha256", &file.artifact.sha256}}) {
      absl::StatusOr<std::string> v = Str(f, member);
      if (!v.ok()) return v.status();
      *out = *v;
    }
    if (!IsDigest(file.artifact.sha256)) return Torn("a file's sha256 is not a digest");
    if (!f["size"].is_number_integer() || f["size"].get<int64_t>() < 0) {
      return Torn("a file's size is not a non-negative integer");
    }
    file.artifact.size = f["size"].get<int64_t>();
    if (!runtime) {
      absl::StatusOr<std::string> p = Str(f, "path");
      if (!p.ok()) return p.status();
      if (p->empty() || (*p)[0] != '/') return Torn("a file's path is not absolute");
      file.path = *p;
    }
    r.files.push_back(std::move(file));
  }
  return r;
}

absl::Status Refuse(std::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat("refused: ", std::string(why)));
}

}  // namespace sn::install

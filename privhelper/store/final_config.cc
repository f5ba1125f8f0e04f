#include "privhelper/store/final_config.h"

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::privhelper::store {
namespace {

using json = nlohmann::json;

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

const std::string* HeldGeneration::NativeImage(std::string_view name) const {
  for (const HeldImage& i : images) {
    if (i.name == name) return &i.native_image;
  }
  return nullptr;
}

std::string EncodeFinal(const HeldGeneration& h, const std::string& installation,
                        const std::string& provider) {
  json images = json::array();
  for (const HeldImage& i : h.images) {
    images.push_back(
        {{"name", i.name}, {"artifact", i.artifact}, {"native_image", i.native_image}});
  }
  json artifacts = json::array();
  for (const PlannedArtifact& a : h.artifacts) {
    artifacts.push_back({{"name", a.name},
                         {"kind", a.kind},
                         {"sha256", a.sha256},
                         {"size", a.size},
                         {"path", a.path}});
  }
  json doc = {{"schema", 2},
              {"installation_id", installation},
              {"generation", h.generation},
              {"specification_digest", h.specification_digest},
              {"provider", provider},
              {"source", h.source},
              {"images", images},
              {"artifacts", artifacts},
              {"helper", h.helper_artifact.empty() ? json(nullptr) : json(h.helper_artifact)}};
  return doc.dump() + "\n";
}

std::string EncodeImagesDerived(int64_t generation, const std::string& installation,
                                std::string_view final_record) {
  json doc = {{"schema", 1},
              {"installation_id", installation},
              {"generation", generation},
              {"final_sha256", Sha256Hex(final_record)}};
  return doc.dump() + "\n";
}

bool ImagesDerivedRecords(std::string_view text, int64_t generation,
                          const std::string& installation, std::string_view final_record) {
  // The encoding is canonical (nlohmann orders members), so equal bytes are the whole check.
  return text == EncodeImagesDerived(generation, installation, final_record);
}

absl::StatusOr<HeldGeneration> DecodeFinal(std::string_view text, const std::string& installation,
                                           const std::string& provider) {
  json d = json::parse(text.begin(), text.end(), nullptr, false);
  auto bad = [](std::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat("final configuration: ", AV(why)));
  };
  if (d.is_discarded() || !d.is_object() || d.size() != 9 || d.value("schema", 0) != 2) {
    return bad("not a schema 2 record");
  }
  for (const char* m : {"installation_id", "generation", "specification_digest", "provider",
                        "source", "images", "artifacts", "helper"}) {
    if (!d.contains(m)) return bad(absl::StrCat("missing ", m));
  }
  if (d["installation_id"] != installation || d["provider"] != provider) {
    return bad("another installation or provider");
  }
  if (!d["generation"].is_number_integer() || !d["specification_digest"].is_string() ||
      !d["source"].is_string() || !d["images"].is_array() || !d["artifacts"].is_array() ||
      !(d["helper"].is_null() || d["helper"].is_string())) {
    return bad("wrong member types");
  }
  HeldGeneration h;
  h.generation = d["generation"].get<int64_t>();
  h.specification_digest = d["specification_digest"].get<std::string>();
  h.source = d["source"].get<std::string>();
  if (!d["helper"].is_null()) h.helper_artifact = d["helper"].get<std::string>();
  for (const json& i : d["images"]) {
    if (!i.is_object() || i.size() != 3 || !i.value("name", json()).is_string() ||
        !i.value("artifact", json()).is_string() || !i.value("native_image", json()).is_string()) {
      return bad("bad image entry");
    }
    h.images.push_back({i["name"].get<std::string>(), i["artifact"].get<std::string>(),
                        i["native_image"].get<std::string>()});
  }
  for (const json& a : d["artifacts"]) {
    if (!a.is_object() || a.size() != 5 || !a.value("name", json()).is_string() ||
        !a.value("kind", json()).is_string() || !a.value("sha256", json()).is_string() ||
        !a.value("size", json()).is_number_integer() || !a.value("path", json()).is_string()) {
      return bad("bad artifact entry");
    }
    h.artifacts.push_back({a["name"].get<std::string>(), a["kind"].get<std::string>(),
                           a["sha256"].get<std::string>(), a["size"].get<int64_t>(),
                           a["path"].get<std::string>()});
  }
  if (h.generation <= 0 || !wire::IsDigest(h.specification_digest) ||
      !wire::IsReleaseSource(h.source)) {
    return bad("bad identity");
  }
  return h;
}

}  // namespace sn::privhelper::store

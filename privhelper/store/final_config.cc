#include "privhelper/store/final_config.h"

#include "absl/strings/str_cat.h"
#include "common/json/record.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::privhelper::store {
namespace {

using json = nlohmann::json;

using sn::json::RecordObject;

// The record's rules; the codes of common/json/record.h. Another installation or provider is
// a foreign record.
absl::StatusOr<HeldGeneration> ReadFinal(std::string_view text, const std::string& installation,
                                         const std::string& provider) {
  ASSIGN_OR_RETURN(RecordObject d,
                   RecordObject::Parse(text, "final configuration", kMaxFinalBytes));
  RETURN_IF_ERROR(d.Schema(2));
  ASSIGN_OR_RETURN(std::string recorded_installation, d.String("installation_id"));
  ASSIGN_OR_RETURN(std::string recorded_provider, d.String("provider"));
  if (recorded_installation != installation || recorded_provider != provider) {
    return d.Torn("another installation or provider");
  }
  HeldGeneration h;
  ASSIGN_OR_RETURN(h.generation, d.Int("generation"));
  ASSIGN_OR_RETURN(h.specification_digest, d.String("specification_digest"));
  ASSIGN_OR_RETURN(h.source, d.String("source"));
  ASSIGN_OR_RETURN(std::vector<RecordObject> images, d.Objects("images"));
  ASSIGN_OR_RETURN(std::vector<RecordObject> artifacts, d.Objects("artifacts"));
  ASSIGN_OR_RETURN(std::optional<std::string> helper, d.NullableString("helper"));
  RETURN_IF_ERROR(d.Finish());
  if (helper.has_value()) h.helper_artifact = *std::move(helper);
  for (RecordObject& i : images) {
    HeldImage image;
    ASSIGN_OR_RETURN(image.name, i.String("name"));
    ASSIGN_OR_RETURN(image.artifact, i.String("artifact"));
    ASSIGN_OR_RETURN(image.native_image, i.String("native_image"));
    RETURN_IF_ERROR(i.Finish());
    h.images.push_back(std::move(image));
  }
  for (RecordObject& a : artifacts) {
    ASSIGN_OR_RETURN(PlannedArtifact artifact, TakeArtifact(a));
    h.artifacts.push_back(std::move(artifact));
  }
  if (h.generation <= 0 || !wire::IsDigest(h.specification_digest) ||
      !wire::IsReleaseSource(h.source)) {
    return d.Malformed("bad identity");
  }
  return h;
}

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
  absl::StatusOr<HeldGeneration> h = ReadFinal(text, installation, provider);
  if (!h.ok()) return sn::json::Recoded(h.status(), absl::StatusCode::kFailedPrecondition);
  return h;
}

}  // namespace sn::privhelper::store

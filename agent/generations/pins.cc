#include "agent/generations/pins.h"

#include "absl/strings/str_cat.h"
#include "common/fs/durable.h"
#include "common/fs/posix_fs.h"
#include "common/json/record.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxPinsBytes = 4096;

Json RefJson(const std::optional<GenerationRef>& ref) {
  if (!ref.has_value()) return nullptr;
  return Json{{"generation", ref->generation},
              {"specification_digest", ref->specification_digest}};
}

absl::StatusOr<std::optional<GenerationRef>> TakeRef(json::RecordObject& j, const char* member) {
  ASSIGN_OR_RETURN(std::optional<json::RecordObject> ref, j.NullableObject(member));
  if (!ref.has_value()) return std::optional<GenerationRef>();
  GenerationRef r;
  ASSIGN_OR_RETURN(r.generation, ref->Int("generation"));
  ASSIGN_OR_RETURN(r.specification_digest, ref->String("specification_digest"));
  RETURN_IF_ERROR(ref->Finish());
  if (r.generation <= 0 || !wire::IsDigest(r.specification_digest)) {
    return j.MemberMalformed(member, "is not a generation reference");
  }
  return std::optional<GenerationRef>(std::move(r));
}

// The record's rules; the codes of common/json/record.h.
absl::StatusOr<DeploymentPins> ReadPins(const std::string& text) {
  ASSIGN_OR_RETURN(json::RecordObject j,
                   json::RecordObject::Parse(text, "deployment pins", kMaxPinsBytes));
  RETURN_IF_ERROR(j.Schema(1));
  DeploymentPins pins;
  ASSIGN_OR_RETURN(pins.target, TakeRef(j, "target"));
  ASSIGN_OR_RETURN(pins.serving, TakeRef(j, "serving"));
  RETURN_IF_ERROR(j.Finish());
  return pins;
}

}  // namespace

std::string FormatPins(const DeploymentPins& pins) {
  Json j = {{"schema", 1}, {"target", RefJson(pins.target)}, {"serving", RefJson(pins.serving)}};
  return j.dump() + "\n";
}

absl::StatusOr<DeploymentPins> ParsePins(const std::string& text) {
  absl::StatusOr<DeploymentPins> pins = ReadPins(text);
  if (!pins.ok()) return json::Recoded(pins.status(), absl::StatusCode::kDataLoss);
  return pins;
}

FilePinStore::FilePinStore(std::string path, fs::Fs* fs)
    : path_(std::move(path)), fs_(fs != nullptr ? fs : fs::PosixFs::Get()) {}

absl::StatusOr<DeploymentPins> FilePinStore::Load() {
  absl::StatusOr<std::string> text = fs::ReadDurableFilePath(*fs_, path_, kMaxPinsBytes);
  if (absl::IsNotFound(text.status())) return DeploymentPins{};
  if (!text.ok()) return text.status();
  absl::StatusOr<DeploymentPins> pins = ParsePins(*text);
  if (!pins.ok()) return absl::DataLossError(absl::StrCat(path_, ": ", pins.status().message()));
  return pins;
}

absl::Status FilePinStore::Store(const DeploymentPins& pins) {
  return fs::PublishReplacingPath(*fs_, path_, FormatPins(pins));
}

}  // namespace sn::agent

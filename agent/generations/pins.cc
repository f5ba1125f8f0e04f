#include "agent/generations/pins.h"

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

using json = nlohmann::json;

json RefJson(const std::optional<GenerationRef>& ref) {
  if (!ref.has_value()) return nullptr;
  return json{{"generation", ref->generation},
              {"specification_digest", ref->specification_digest}};
}

absl::StatusOr<std::optional<GenerationRef>> ParseRef(const json& j, const char* member) {
  auto it = j.find(member);
  if (it == j.end()) return absl::DataLossError(absl::StrCat("member ", member, " missing"));
  if (it->is_null()) return std::optional<GenerationRef>();
  if (!it->is_object() || it->size() != 2) {
    return absl::DataLossError(absl::StrCat("member ", member, " is not a generation reference"));
  }
  auto g = it->find("generation");
  auto d = it->find("specification_digest");
  if (g == it->end() || !g->is_number_integer() || g->get<int64_t>() <= 0 || d == it->end() ||
      !d->is_string() || !wire::IsDigest(d->get<std::string>())) {
    return absl::DataLossError(absl::StrCat("member ", member, " is not a generation reference"));
  }
  return std::optional<GenerationRef>(GenerationRef{g->get<int64_t>(), d->get<std::string>()});
}

}  // namespace

std::string FormatPins(const DeploymentPins& pins) {
  json j = {{"schema", 1}, {"target", RefJson(pins.target)}, {"serving", RefJson(pins.serving)}};
  return j.dump() + "\n";
}

absl::StatusOr<DeploymentPins> ParsePins(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("not a JSON object");
  if (j.size() != 3) return absl::DataLossError("unexpected members");
  auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_number_integer() || schema->get<int64_t>() != 1) {
    return absl::DataLossError("schema is not 1");
  }
  DeploymentPins pins;
  absl::StatusOr<std::optional<GenerationRef>> target = ParseRef(j, "target");
  if (!target.ok()) return target.status();
  absl::StatusOr<std::optional<GenerationRef>> serving = ParseRef(j, "serving");
  if (!serving.ok()) return serving.status();
  pins.target = *target;
  pins.serving = *serving;
  return pins;
}

absl::StatusOr<DeploymentPins> FilePinStore::Load() {
  absl::StatusOr<std::string> text = ReadSmallFile(path_, 4096);
  if (absl::IsNotFound(text.status())) return DeploymentPins{};
  if (!text.ok()) return text.status();
  absl::StatusOr<DeploymentPins> pins = ParsePins(*text);
  if (!pins.ok()) return absl::DataLossError(absl::StrCat(path_, ": ", pins.status().message()));
  return pins;
}

absl::Status FilePinStore::Store(const DeploymentPins& pins) {
  return WriteFileAtomically(path_, FormatPins(pins), 0600);
}

}  // namespace sn::agent

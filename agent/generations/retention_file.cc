#include "agent/generations/retention_file.h"

#include "absl/strings/str_cat.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

constexpr char kTimeFormat[] = "%Y-%m-%d%ET%H:%M:%E3SZ";

nlohmann::json TimeOrNull(const std::optional<absl::Time>& t) {
  if (!t.has_value()) return nullptr;
  return absl::FormatTime(kTimeFormat, *t, absl::UTCTimeZone());
}

absl::Status Torn(const std::string& what) {
  return absl::DataLossError(absl::StrCat("node/retention.json: ", what));
}

absl::StatusOr<std::optional<absl::Time>> TimeFrom(const nlohmann::json& j,
                                                   const char* member) {
  if (!j.contains(member)) return Torn(absl::StrCat("missing ", member));
  const nlohmann::json& v = j.at(member);
  if (v.is_null()) return std::optional<absl::Time>();
  if (!v.is_string()) return Torn(absl::StrCat(member, " is not a timestamp"));
  absl::Time t;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*SZ", v.get<std::string>(), absl::UTCTimeZone(),
                       &t, &err)) {
    return Torn(absl::StrCat(member, " is not a timestamp"));
  }
  return std::optional<absl::Time>(t);
}

}  // namespace

std::string FormatRetentionRecord(const std::vector<RetentionStatus>& statuses,
                                  absl::Time now) {
  nlohmann::json j;
  j["schema"] = 1;
  j["updated_at"] = absl::FormatTime(kTimeFormat, now, absl::UTCTimeZone());
  nlohmann::json list = nlohmann::json::array();
  for (const RetentionStatus& s : statuses) {
    nlohmann::json e;
    e["generation"] = s.ref.generation;
    e["specification_digest"] = s.ref.specification_digest;
    e["answered_at"] = TimeOrNull(s.answered_at);
    e["keep"] = s.keep.has_value() ? nlohmann::json(*s.keep) : nlohmann::json(nullptr);
    e["granted_at"] = TimeOrNull(s.granted_at);
    e["collection"] = s.collection;
    e["reason"] = s.reason;
    e["diagnostic"] = s.diagnostic.has_value()
                          ? nlohmann::json(std::string(DiagnosticCode(*s.diagnostic)))
                          : nlohmann::json(nullptr);
    list.push_back(std::move(e));
  }
  j["generations"] = std::move(list);
  return j.dump() + "\n";
}

absl::StatusOr<std::vector<RetentionStatus>> ParseRetentionRecord(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Torn("not a JSON object");
  if (!j.contains("schema") || j["schema"] != 1) return Torn("unknown schema");
  if (!j.contains("generations") || !j["generations"].is_array()) {
    return Torn("missing generations");
  }
  std::vector<RetentionStatus> out;
  for (const nlohmann::json& e : j["generations"]) {
    if (!e.is_object()) return Torn("an entry is not an object");
    RetentionStatus s;
    if (!e.contains("generation") || !e["generation"].is_number_integer() ||
        e["generation"].get<int64_t>() <= 0) {
      return Torn("an entry without a positive generation");
    }
    s.ref.generation = e["generation"].get<int64_t>();
    if (!e.contains("specification_digest") || !e["specification_digest"].is_string() ||
        !wire::IsDigest(e["specification_digest"].get<std::string>())) {
      return Torn("an entry without a digest");
    }
    s.ref.specification_digest = e["specification_digest"].get<std::string>();
    absl::StatusOr<std::optional<absl::Time>> answered = TimeFrom(e, "answered_at");
    if (!answered.ok()) return answered.status();
    s.answered_at = *answered;
    absl::StatusOr<std::optional<absl::Time>> granted = TimeFrom(e, "granted_at");
    if (!granted.ok()) return granted.status();
    s.granted_at = *granted;
    if (!e.contains("keep") || !(e["keep"].is_null() || e["keep"].is_boolean())) {
      return Torn("keep is not a boolean or null");
    }
    if (e["keep"].is_boolean()) s.keep = e["keep"].get<bool>();
    if (!e.contains("collection") || !e["collection"].is_string() || !e.contains("reason") ||
        !e["reason"].is_string()) {
      return Torn("collection or reason is not a string");
    }
    s.collection = e["collection"].get<std::string>();
    s.reason = e["reason"].get<std::string>();
    if (!e.contains("diagnostic")) return Torn("missing diagnostic");
    if (e["diagnostic"].is_string()) {
      s.diagnostic = ParseDiagnostic(e["diagnostic"].get<std::string>());
      if (!s.diagnostic.has_value()) return Torn("unknown diagnostic");
    } else if (!e["diagnostic"].is_null()) {
      return Torn("diagnostic is not a code or null");
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace sn::agent

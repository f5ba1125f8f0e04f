#include "agent/generations/retention_file.h"

#include "absl/strings/str_cat.h"
#include "common/fs/durable.h"
#include "common/fs/posix_fs.h"
#include "common/json/record.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

constexpr char kTimeFormat[] = "%Y-%m-%d%ET%H:%M:%E3SZ";

nlohmann::json TimeOrNull(const std::optional<absl::Time>& t) {
  if (!t.has_value()) return nullptr;
  return absl::FormatTime(kTimeFormat, *t, absl::UTCTimeZone());
}

constexpr size_t kMaxRetentionBytes = 1 << 20;

absl::StatusOr<std::optional<absl::Time>> TakeTime(json::RecordObject& j, const char* member) {
  ASSIGN_OR_RETURN(std::optional<std::string> text, j.NullableString(member));
  if (!text.has_value()) return std::optional<absl::Time>();
  absl::Time t;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*SZ", *text, absl::UTCTimeZone(), &t, &err)) {
    return j.MemberMalformed(member, "is not a timestamp");
  }
  return std::optional<absl::Time>(t);
}

// The record's rules; the codes of common/json/record.h.
absl::StatusOr<std::vector<RetentionStatus>> ReadRetention(const std::string& text) {
  ASSIGN_OR_RETURN(json::RecordObject j,
                   json::RecordObject::Parse(text, "node/retention.json", kMaxRetentionBytes));
  RETURN_IF_ERROR(j.Schema(1));
  ASSIGN_OR_RETURN(std::optional<absl::Time> updated, TakeTime(j, "updated_at"));
  if (!updated.has_value()) return j.MemberMalformed("updated_at", "is not a timestamp");
  ASSIGN_OR_RETURN(std::vector<json::RecordObject> entries, j.Objects("generations"));
  RETURN_IF_ERROR(j.Finish());
  std::vector<RetentionStatus> out;
  for (json::RecordObject& e : entries) {
    RetentionStatus s;
    ASSIGN_OR_RETURN(s.ref.generation, e.Int("generation"));
    if (s.ref.generation <= 0) return e.MemberMalformed("generation", "is not positive");
    ASSIGN_OR_RETURN(s.ref.specification_digest, e.String("specification_digest"));
    if (!wire::IsDigest(s.ref.specification_digest)) {
      return e.MemberMalformed("specification_digest", "is not a digest");
    }
    ASSIGN_OR_RETURN(s.answered_at, TakeTime(e, "answered_at"));
    ASSIGN_OR_RETURN(s.granted_at, TakeTime(e, "granted_at"));
    ASSIGN_OR_RETURN(s.keep, e.NullableBool("keep"));
    ASSIGN_OR_RETURN(s.collection, e.String("collection"));
    ASSIGN_OR_RETURN(s.reason, e.String("reason"));
    ASSIGN_OR_RETURN(std::optional<std::string> diagnostic, e.NullableString("diagnostic"));
    if (diagnostic.has_value()) {
      s.diagnostic = ParseDiagnostic(*diagnostic);
      if (!s.diagnostic.has_value()) return e.MemberMalformed("diagnostic", "is unknown");
    }
    RETURN_IF_ERROR(e.Finish());
    out.push_back(std::move(s));
  }
  return out;
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
  absl::StatusOr<std::vector<RetentionStatus>> r = ReadRetention(text);
  if (!r.ok()) return json::Recoded(r.status(), absl::StatusCode::kDataLoss);
  return r;
}

absl::Status WriteRetentionRecord(const std::string& path,
                                  const std::vector<RetentionStatus>& statuses, absl::Time now,
                                  fs::Fs* fs) {
  return fs::PublishReplacingPath(fs != nullptr ? *fs : *fs::PosixFs::Get(), path,
                                  FormatRetentionRecord(statuses, now));
}

}  // namespace sn::agent

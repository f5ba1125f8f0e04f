#include "agent/generations/progress_file.h"

#include "common/atomic_file.h"
#include "nlohmann/json.hpp"

namespace sn::agent {

std::string FormatProgressRecord(const PreparationJob& job, const PreparationProgress& progress,
                                 const std::optional<PreparationOutcome>& finished,
                                 absl::Time now) {
  nlohmann::json j;
  j["schema"] = 1;
  j["generation"] = job.ref.generation;
  j["specification_digest"] = job.ref.specification_digest;
  j["role"] = std::string(JobRoleName(job.role));
  if (!finished.has_value()) {
    j["state"] = "running";
    j["diagnostic"] = nullptr;
  } else if (!finished->failure.has_value()) {
    j["state"] = "ready";
    j["diagnostic"] = nullptr;
  } else {
    j["state"] = "failed";
    j["diagnostic"] = std::string(DiagnosticCode(*finished->failure));
  }
  j["phase"] = progress.phase;
  j["artifact"] = progress.artifact;
  j["bytes_done"] = progress.bytes_done;
  j["bytes_total"] = progress.bytes_total;
  j["updated_at"] = absl::FormatTime("%Y-%m-%d%ET%H:%M:%E3SZ", now, absl::UTCTimeZone());
  return j.dump() + "\n";
}

absl::StatusOr<ProgressRecord> ParseProgressRecord(const std::string& text) {
  auto torn = [](const char* what) {
    return absl::DataLossError(std::string("progress record: ") + what);
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return torn("not a JSON object");
  if (!j.contains("schema") || j["schema"] != 1) return torn("unknown schema");
  auto str = [&](const char* m) { return j.contains(m) && j[m].is_string(); };
  auto integer = [&](const char* m) { return j.contains(m) && j[m].is_number_integer(); };
  if (!integer("generation") || !str("specification_digest") || !str("role") || !str("state") ||
      !str("phase") || !str("artifact") || !integer("bytes_done") || !integer("bytes_total") ||
      !str("updated_at") || !j.contains("diagnostic")) {
    return torn("a member is missing or of the wrong type");
  }
  ProgressRecord r;
  r.job.ref = GenerationRef{j["generation"].get<int64_t>(),
                            j["specification_digest"].get<std::string>()};
  const std::string role = j["role"].get<std::string>();
  r.job.role = role == "target"    ? JobRole::kTarget
               : role == "serving" ? JobRole::kServing
                                   : JobRole::kOther;
  r.state = j["state"].get<std::string>();
  if (r.state != "running" && r.state != "ready" && r.state != "failed") {
    return torn("unknown state");
  }
  if (j["diagnostic"].is_string()) {
    r.diagnostic = ParseDiagnostic(j["diagnostic"].get<std::string>());
    if (!r.diagnostic.has_value()) return torn("unknown diagnostic");
  } else if (!j["diagnostic"].is_null()) {
    return torn("diagnostic is not a code or null");
  }
  r.progress.phase = j["phase"].get<std::string>();
  r.progress.artifact = j["artifact"].get<std::string>();
  r.progress.bytes_done = j["bytes_done"].get<int64_t>();
  r.progress.bytes_total = j["bytes_total"].get<int64_t>();
  r.updated_at = j["updated_at"].get<std::string>();
  return r;
}

absl::Status WriteProgressRecord(const std::string& path, const PreparationJob& job,
                                 const PreparationProgress& progress,
                                 const std::optional<PreparationOutcome>& finished,
                                 absl::Time now) {
  return WriteFileAtomically(path, FormatProgressRecord(job, progress, finished, now), 0600);
}

}  // namespace sn::agent

#include "agent/generations/progress_file.h"

#include "common/fs/durable.h"
#include "common/fs/posix_fs.h"
#include "common/json/record.h"
#include "common/status_macros.h"
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

namespace {

constexpr size_t kMaxProgressBytes = 64 * 1024;

// The record's rules; the codes of common/json/record.h.
absl::StatusOr<ProgressRecord> ReadProgress(const std::string& text) {
  ASSIGN_OR_RETURN(json::RecordObject j,
                   json::RecordObject::Parse(text, "progress record", kMaxProgressBytes));
  RETURN_IF_ERROR(j.Schema(1));
  ProgressRecord r;
  ASSIGN_OR_RETURN(r.job.ref.generation, j.Int("generation"));
  ASSIGN_OR_RETURN(r.job.ref.specification_digest, j.String("specification_digest"));
  ASSIGN_OR_RETURN(std::string role, j.String("role"));
  r.job.role = role == "target"    ? JobRole::kTarget
               : role == "serving" ? JobRole::kServing
                                   : JobRole::kOther;
  ASSIGN_OR_RETURN(r.state, j.String("state"));
  if (r.state != "running" && r.state != "ready" && r.state != "failed") {
    return j.MemberMalformed("state", "is not running, ready or failed");
  }
  ASSIGN_OR_RETURN(std::optional<std::string> diagnostic, j.NullableString("diagnostic"));
  if (diagnostic.has_value()) {
    r.diagnostic = ParseDiagnostic(*diagnostic);
    if (!r.diagnostic.has_value()) return j.MemberMalformed("diagnostic", "is unknown");
  }
  ASSIGN_OR_RETURN(r.progress.phase, j.String("phase"));
  ASSIGN_OR_RETURN(r.progress.artifact, j.String("artifact"));
  ASSIGN_OR_RETURN(r.progress.bytes_done, j.Int("bytes_done"));
  ASSIGN_OR_RETURN(r.progress.bytes_total, j.Int("bytes_total"));
  ASSIGN_OR_RETURN(r.updated_at, j.String("updated_at"));
  RETURN_IF_ERROR(j.Finish());
  return r;
}

}  // namespace

absl::StatusOr<ProgressRecord> ParseProgressRecord(const std::string& text) {
  absl::StatusOr<ProgressRecord> r = ReadProgress(text);
  if (!r.ok()) return json::Recoded(r.status(), absl::StatusCode::kDataLoss);
  return r;
}

absl::Status WriteProgressRecord(const std::string& path, const PreparationJob& job,
                                 const PreparationProgress& progress,
                                 const std::optional<PreparationOutcome>& finished,
                                 absl::Time now, fs::Fs* fs) {
  return fs::PublishReplacingPath(fs != nullptr ? *fs : *fs::PosixFs::Get(), path,
                                  FormatProgressRecord(job, progress, finished, now));
}

}  // namespace sn::agent

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

absl::Status WriteProgressRecord(const std::string& path, const PreparationJob& job,
                                 const PreparationProgress& progress,
                                 const std::optional<PreparationOutcome>& finished,
                                 absl::Time now) {
  return WriteFileAtomically(path, FormatProgressRecord(job, progress, finished, now), 0600);
}

}  // namespace sn::agent

// Where a preparation's progress is kept for the operator (`agent generations`
// reads it, with the agent running or stopped): generations/<G>.progress.json in the agent's
// state, rewritten (on the filesystem seam, common/fs/durable.h: temporary, fsync, rename,
// fsync of the directory) at each phase change,
// at most every 5 s while the bytes stream, and once more when the attempt ends.
//
//   {"schema":1,"generation":G,"specification_digest":"<hex>","role":"target"|"serving"|"other",
//    "state":"running"|"ready"|"failed","diagnostic":"<code>"|null,"phase":"<phase>",
//    "artifact":"<name>","bytes_done":N,"bytes_total":N,"updated_at":"<RFC 3339>"}
//
// Advisory: nothing decides from it. Runs on the event loop (a few hundred bytes).
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_PROGRESS_FILE_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_PROGRESS_FILE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/generations/types.h"
#include "common/fs/fs.h"

namespace sn::agent {

std::string FormatProgressRecord(const PreparationJob& job, const PreparationProgress& progress,
                                 const std::optional<PreparationOutcome>& finished,
                                 absl::Time now);

// The record as `agent generations` reads it back.
struct ProgressRecord {
  PreparationJob job;
  std::string state;                     // "running", "ready" or "failed"
  std::optional<Diagnostic> diagnostic;  // with "failed"
  PreparationProgress progress;
  std::string updated_at;
};
// DataLoss naming what is wrong for a torn, foreign or malformed record (the strict record
// reader, common/json/record.h).
absl::StatusOr<ProgressRecord> ParseProgressRecord(const std::string& text);

// Writes the record to `path` on `fs` (nullptr: the real filesystem); errors are for the
// caller to log.
absl::Status WriteProgressRecord(const std::string& path, const PreparationJob& job,
                                 const PreparationProgress& progress,
                                 const std::optional<PreparationOutcome>& finished,
                                 absl::Time now, fs::Fs* fs = nullptr);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_PROGRESS_FILE_H_

// What the node last learned in the retention exchange, kept for the operator (`agent
// generations` reads it with the agent running or stopped): node/retention.json in the
// agent's state, rewritten (WriteRetentionRecord, on the filesystem seam: temporary, fsync,
// rename, fsync of node/) after every change — an answer, a grant, a collection decision.
//
//   {"schema":1,"updated_at":"<RFC 3339>","generations":[{"generation":G,
//    "specification_digest":"<hex>","answered_at":"<RFC 3339>"|null,"keep":bool|null,
//    "granted_at":"<RFC 3339>"|null,"collection":"<decision>","reason":"<text>",
//    "diagnostic":"<code>"|null}, ...]}
//
// Advisory: nothing decides from it (a drop grant is valid only on the connection that gave
// it, so none survives a restart). The writer runs on the event loop (a few KiB).
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_RETENTION_FILE_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_RETENTION_FILE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/generations/types.h"
#include "common/diagnostics.h"
#include "common/fs/fs.h"

namespace sn::agent {

// What the node last learned about one pair.
struct RetentionStatus {
  GenerationRef ref;
  std::optional<absl::Time> answered_at;  // Core's last matched answer
  std::optional<bool> keep;               // that answer
  std::optional<absl::Time> granted_at;   // the last drop grant
  // The last collection decision: "" (none yet), "held locally", or a CollectOutcomeName.
  std::string collection;
  std::string reason;                     // why it is still kept, when known
  std::optional<Diagnostic> diagnostic;   // privhelper's, with "refused"
  bool operator==(const RetentionStatus&) const = default;
};

std::string FormatRetentionRecord(const std::vector<RetentionStatus>& statuses,
                                  absl::Time now);
// DataLoss naming what is wrong for a torn, foreign or malformed file (the strict record
// reader, common/json/record.h).
absl::StatusOr<std::vector<RetentionStatus>> ParseRetentionRecord(const std::string& text);

// Publishes the record for `statuses` at `path` on `fs` (nullptr: the real filesystem).
absl::Status WriteRetentionRecord(const std::string& path,
                                  const std::vector<RetentionStatus>& statuses, absl::Time now,
                                  fs::Fs* fs = nullptr);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_RETENTION_FILE_H_

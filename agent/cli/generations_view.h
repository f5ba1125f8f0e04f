// `agent generations --config=FILE [--json]`: what the node holds and why (the
// operator's view; docs/operator-guide.md). Read-only and lock-free: it reads privhelper's
// ListGenerations (records, stat() and /proc only: nothing is locked, checksummed or changed)
// and the agent's own files — the deployment pins (node/deployment.json), what the retention
// exchange last learned (node/retention.json), the preparation progress records
// (generations/<G>.progress.json), the stored specifications (generations/<G>.spec.json) and
// the durable operation record (operations/) — and never writes, creates or locks anything.
// It works with the agent running or stopped; when privhelper cannot be reached it says so and
// shows what the agent alone knows.
//
// Split in two so the rows are tested without files or sockets: ReadGenerationsInputs gathers
// the facts, BuildGenerationRows decides the rows, the formatters print them.
#ifndef SANDBOX_NODE_AGENT_CLI_GENERATIONS_VIEW_H_
#define SANDBOX_NODE_AGENT_CLI_GENERATIONS_VIEW_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/generations/pins.h"
#include "agent/generations/privhelper_retirement.h"
#include "agent/generations/progress_file.h"
#include "agent/generations/retention_file.h"
#include "agent/privhelper_rpc/deadlines.h"
#include "agent/state/config.h"

namespace sn::agent {

struct GenerationsInputs {
  absl::StatusOr<PrivhelperGenerations> privhelper = absl::UnavailableError("not asked");
  DeploymentPins pins;
  std::map<int64_t, ProgressRecord> progress;
  std::map<int64_t, std::string> stored_specifications;  // generation -> SHA-256 of the bytes
  std::map<int64_t, int> unfinished_mutations;           // queued or running, by generation
  std::vector<RetentionStatus> retention;
  // Files that could not be read (torn, foreign, unreadable): printed, never guessed around.
  std::vector<std::string> problems;
};

// One row of the view (the --json object of one generation).
struct GenerationRow {
  int64_t generation = 0;
  std::string specification_digest;
  std::string state;  // preparing | ready | failed | collecting | dropped
  std::vector<std::string> roles;  // "target", "serving"
  std::optional<std::string> diagnostic;
  std::vector<std::string> references;
  // Preparation progress, when preparing: the agent's attempt (phase, artifact, bytes) and
  // privhelper's store (artifacts and bytes stored out of the plan's, import started).
  struct Progress {
    std::optional<std::string> phase;
    std::optional<std::string> artifact;
    std::optional<int64_t> bytes_done;
    std::optional<int64_t> bytes_total;
    std::optional<std::string> updated_at;
    std::optional<int> artifacts_stored;
    std::optional<int> artifacts_total;
    std::optional<int64_t> bytes_stored;
    std::optional<int64_t> plan_bytes_total;
    std::optional<bool> import_started;
  };
  std::optional<Progress> progress;
};

// Reads everything (never writes). `privhelper_deadline` bounds ListGenerations.
GenerationsInputs ReadGenerationsInputs(
    const AgentConfig& config, absl::Duration privhelper_deadline = kListGenerationsDeadline);

// The rows in generation order.
std::vector<GenerationRow> BuildGenerationRows(const GenerationsInputs& in);

// `{"generations": [...]}` exactly (docs/operator-guide.md), one line.
std::string FormatGenerationsJson(const std::vector<GenerationRow>& rows);
// The table an operator reads, with privhelper's reachability and any unreadable file.
std::string FormatGenerationsText(const GenerationsInputs& in,
                                  const std::vector<GenerationRow>& rows);

// The command: prints to `out`, problems to `err`. Exit code 0 when privhelper answered and
// every file was readable, 1 when the view is partial (privhelper unreachable, or a file
// unreadable; it is still printed).
int RunGenerationsCommand(const AgentConfig& config, bool json, std::FILE* out,
                          std::FILE* err);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CLI_GENERATIONS_VIEW_H_

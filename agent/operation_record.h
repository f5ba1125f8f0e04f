// The durable operation record (spec/wire.md §5 "Durable record"): every mutation is recorded
// when accepted, marked before its native call starts, and completed with its outcome; observe
// answers from it across reconnects and restarts. One file per operation,
// state_dir/operations/<id>.json, published with WriteFileAtomically (temp, fsync, rename,
// fsync dir). Outcome metadata only: arguments and outputs are never stored (an exec result
// is kept as its exit code with empty outputs and truncated: true).
#ifndef SANDBOX_NODE_AGENT_OPERATION_RECORD_H_
#define SANDBOX_NODE_AGENT_OPERATION_RECORD_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/wire/frames.h"

namespace sn::agent {

enum class RecordState { kQueued, kRunning, kCompleted };

struct RecordEntry {
  std::string id;
  std::string operation;  // wire name
  std::string sandbox_id;
  int64_t generation = 0;
  RecordState state = RecordState::kQueued;
  absl::Time accepted_at;
  std::optional<absl::Time> completed_at;
  std::optional<wire::RecordedResponse> response;  // iff completed
};

// Strips what the record must not hold (exec outputs) from a response.
wire::RecordedResponse ForRecord(wire::RecordedResponse r);

class OperationRecord {
 public:
  OperationRecord(std::string dir, const Clock* clock);

  // Reads every record. An entry that was queued completes as unavailable, one that was
  // running as uncertain (durably). Completed entries older than `retention` are removed.
  // A torn or foreign file is reported in the log and left in place for inspection.
  absl::Status Recover(absl::Duration retention);

  const RecordEntry* Find(const std::string& id) const;
  // True when a kill of `sandbox_id` completed successfully within the record window (the
  // record's retention): a new create of that id must answer conflict (spec §5).
  bool KilledWithinWindow(const std::string& sandbox_id) const {
    return killed_.count(sandbox_id) > 0;
  }
  // REQUIRES: `id` is not recorded yet. Durable before returning.
  absl::Status Accept(const std::string& id, std::string_view operation,
                      const std::string& sandbox_id, int64_t generation);
  absl::Status MarkRunning(const std::string& id);
  absl::Status Complete(const std::string& id, wire::RecordedResponse response);

 private:
  absl::Status Persist(const RecordEntry& e);
  std::string PathOf(const std::string& id) const;

  std::string dir_;
  const Clock* clock_;
  void Index(const RecordEntry& e);

  std::map<std::string, RecordEntry> entries_;
  std::set<std::string> killed_;  // sandboxes with a successful kill in the record
};

// The record's JSON form (exposed for tests of torn-file handling).
std::string EncodeRecordEntry(const RecordEntry& e);
absl::StatusOr<RecordEntry> DecodeRecordEntry(std::string_view json);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_OPERATION_RECORD_H_

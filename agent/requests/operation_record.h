// The durable operation record (spec/wire.md §5 "Durable record"): every mutation is recorded
// when accepted, marked before its native call starts, and completed with its outcome; observe
// answers from it across reconnects and restarts. One file per operation,
// state_dir/operations/<id>.json, on the filesystem seam (common/fs/durable.h: published
// with PublishReplacing: temporary, fsync, rename, fsync of operations/; Recover makes the
// directory durable before it reads and removes temporaries a crash left), read with the
// strict record reader (common/json/record.h). Outcome metadata only: arguments and outputs
// are never stored (an exec result is kept as its exit code with empty outputs and
// truncated: true).
//
// Bounds (a hostile Core must not grow the record without limit):
//   - completed records are removed kRecordRetention (48 h) after completion, at start-up
//     (Recover) and while running (PruneEvery, a timer on the event loop);
//   - at most `max_records` records exist (kMaxOperationRecords by default), whatever their
//     state. A mutation that would exceed it is refused (Accept: ResourceExhausted, nothing
//     written; the queue answers `unavailable` and does not run it) after completed records
//     older than kMinRecordRetention (the spec's 24 h) were removed to make room.
//   No completed record younger than kMinRecordRetention is ever removed, and no record that
//   is queued or running.
// Single-threaded: every method runs on the agent's event loop.
#ifndef SANDBOX_NODE_AGENT_REQUESTS_OPERATION_RECORD_H_
#define SANDBOX_NODE_AGENT_REQUESTS_OPERATION_RECORD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/fs/fs.h"
#include "common/wire/frames.h"

namespace sn::agent {

// Spec §5: observe answers from the record for at least 24 hours after completion.
inline constexpr absl::Duration kMinRecordRetention = absl::Hours(24);
// How long completed records are normally kept; also the window in which a killed sandbox id
// answers `conflict` to a new create (docs/protocol.md 12d).
inline constexpr absl::Duration kRecordRetention = absl::Hours(48);
// How often the running agent removes expired records.
inline constexpr absl::Duration kRecordPruneInterval = absl::Minutes(10);
// The most records the node keeps. Each record is one file of < 1 KiB, so one filesystem
// block (4 KiB) and an inode on disk and ~0.5 KiB in the agent's memory: 32768 records are
// at most ~136 MiB of the state filesystem and ~16 MiB of memory, and Recover reads them in
// about a second. That is 512 times the node-wide bound of 64 operations in flight, so the
// mutations in flight alone can never exhaust it, and it holds the spec's 24 hours of an
// average 22 mutations a minute (0.38/s) sustained for the whole day: a Core that goes beyond
// that gets `unavailable` (retry later) instead of a record that silently forgets outcomes.
inline constexpr size_t kMaxOperationRecords = 32768;

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
  // `fs` (not owned; nullptr: the real filesystem) must outlive this.
  OperationRecord(std::string dir, const Clock* clock,
                  size_t max_records = kMaxOperationRecords, fs::Fs* fs = nullptr);

  // Reads every record. An entry that was queued completes as unavailable, one that was
  // running as uncertain (durably; when its file cannot be written, e.g. a full state disk,
  // in memory only, logged: the file keeps its queued/running state, which every later start
  // completes the same way). Completed entries older than `retention` (at least
  // kMinRecordRetention) are removed. A torn or foreign file is reported in the log and left
  // in place for inspection (it does not count toward the bound).
  absl::Status Recover(absl::Duration retention = kRecordRetention);

  // Removes completed records that completed more than `retention` ago (a `retention` below
  // kMinRecordRetention is raised to it). Returns how many were removed. A file that cannot
  // be removed is logged and kept (and still counts).
  size_t Prune(absl::Duration retention);
  // Prunes with `retention` every `interval` on `timers` until this record is destroyed.
  void PruneEvery(TimerQueue* timers, absl::Duration interval,
                  absl::Duration retention = kRecordRetention);

  // Records held (every state).
  size_t size() const { return entries_.size(); }
  size_t max_records() const { return max_records_; }

  const RecordEntry* Find(const std::string& id) const;
  // True when a kill of `sandbox_id` completed successfully within the record window (the
  // record's retention): a new create of that id must answer conflict (spec §5).
  bool KilledWithinWindow(const std::string& sandbox_id) const {
    return killed_.count(sandbox_id) > 0;
  }
  // REQUIRES: `id` is not recorded yet. Durable before returning. ResourceExhausted (nothing
  // written) when the record is at its bound, see above.
  absl::Status Accept(const std::string& id, std::string_view operation,
                      const std::string& sandbox_id, int64_t generation);
  absl::Status MarkRunning(const std::string& id);
  absl::Status Complete(const std::string& id, wire::RecordedResponse response);
  // After a Complete that could not be written (a full state disk): the entry completes in
  // memory only, as Recover will complete its durable state at the next start (`queued` ->
  // unavailable, `running` -> uncertain), so `observe` answers the same before and after a
  // restart. Returns that error code ("uncertain" for an unknown id).
  const char* CompleteInMemoryAsRecoverWould(const std::string& id);

 private:
  absl::Status Persist(const RecordEntry& e);
  std::string PathOf(const std::string& id) const;
  static std::string NameOf(const std::string& id);
  // operations/, opened by its path at each use (created, durably, when missing).
  absl::StatusOr<fs::Dir> Directory();

  void Index(const RecordEntry& e);
  void Unindex(const RecordEntry& e);
  void SchedulePrune();

  std::string dir_;
  const Clock* clock_;
  size_t max_records_;
  fs::Fs* fs_;

  std::map<std::string, RecordEntry> entries_;
  // Completed entries by completion time, oldest first (what Prune walks).
  std::set<std::pair<absl::Time, std::string>> completed_;
  // Sandboxes with a successful kill in the record, with how many such kills.
  std::map<std::string, int> killed_;

  TimerQueue* prune_timers_ = nullptr;
  absl::Duration prune_interval_;
  absl::Duration prune_retention_;
  std::unique_ptr<Timer> prune_timer_;
};

// The record's JSON form (exposed for tests of torn-file handling).
std::string EncodeRecordEntry(const RecordEntry& e);
absl::StatusOr<RecordEntry> DecodeRecordEntry(std::string_view json);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_REQUESTS_OPERATION_RECORD_H_

// The durable operation record (spec/wire.md §5 "Durable record"): every mutation is recorded
// when accepted, marked before its native call starts, and completed with its outcome; observe
// answers from it across reconnects and restarts. On the filesystem seam (common/fs/fs.h),
// read with the strict record reader (common/json/record.h). Outcome metadata only: arguments
// and outputs are never stored (an exec result is kept as its exit code with empty outputs and
// truncated: true).
//
// On disk it is an append-only journal (docs/formats.md, "The operation record"; its format
// and reader: operation_journal.h):
// state_dir/operations/journal-<20-digit sequence>.jsonl segments, each a header line and then
// one line per transition, the entry's whole state (EncodeRecordEntry); the last line of an id,
// in segment order, is its state. A transition is one append and one fsync of the current
// segment (no rename, no directory fsync), durable before it takes effect. A segment that
// reaches `segment_bytes` is followed by a new one; every start begins a new one. A new
// segment's header SEALS the segment before it: it names it and its length of valid lines,
// and is durable (file and directory fsync) before anything is appended after it. So:
//   - a sealed segment is read exactly to its sealed length and every line in it must read
//     (otherwise Recover refuses, DataLoss: the bytes are damaged, not torn by a crash);
//   - the newest (unsealed) segment is read to its first line that does not read: that is
//     the unfinished append a crash cut, never acknowledged; it is ignored (logged), and the
//     next start's segment seals the segment before it, so nothing is ever appended after it;
//   - after a failed append or fsync the segment is sealed at once, before the failed line
//     (a new segment), and nothing more is written to it.
// A segment is removed (unlink, then directory fsync) once no kept record has its last line
// there. Records of the earlier one-file-per-record format (operations/<id>.json) are read by
// Recover, copied into the journal and then removed.
//
// Bounds (a hostile Core must not grow the record without limit):
//   - completed records are removed kRecordRetention (48 h) after completion, at start-up
//     (Recover) and while running (PruneEvery, a timer on the event loop);
//   - at most `max_records` records exist (kMaxOperationRecords by default, the agent's
//     `operation_record_max`), whatever their state, and the journal's segments hold at most
//     max_records KiB. A mutation that would exceed either is refused (Accept:
//     ResourceExhausted, nothing written; the queue answers `unavailable` and does not run it)
//     after completed records older than kMinRecordRetention (the spec's 24 h) were removed
//     to make room.
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
// The most records the node keeps by default (the agent's `operation_record_max`). A record is
// three journal lines of ~0.3 KiB over its life (not a file and a 4 KiB block each, as in the
// earlier format) and ~0.5 KiB of the agent's memory: 262144 records are at most 256 MiB of
// journal (the byte bound) and ~130 MiB of memory, and hold the spec's 24 hours of an average
// 3 mutations a second (exec included) sustained for the whole day. A Core that goes beyond
// that gets `unavailable` (retry later) instead of a record that silently forgets outcomes.
inline constexpr size_t kMaxOperationRecords = 262144;
// The bounds an operator may configure (agent config `operation_record_max`).
inline constexpr size_t kMinConfigurableOperationRecords = 1024;
inline constexpr size_t kMaxConfigurableOperationRecords = 4194304;
// The journal's bytes allowed per record of the bound.
inline constexpr size_t kJournalBytesPerRecord = 1024;
// A segment is followed by a new one once it holds this many bytes.
inline constexpr size_t kJournalSegmentBytes = 8 << 20;

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
  // `fs` (not owned; nullptr: the real filesystem) must outlive this. `segment_bytes`: when a
  // segment is followed by a new one (tests and the simulation use small segments).
  OperationRecord(std::string dir, const Clock* clock,
                  size_t max_records = kMaxOperationRecords, fs::Fs* fs = nullptr,
                  size_t segment_bytes = kJournalSegmentBytes);
  ~OperationRecord();

  // Reads every record: the journal (see above) and files of the earlier format. An entry
  // that was queued completes as unavailable, one that was running as uncertain (durably;
  // when the journal cannot be written, e.g. a full state disk, in memory only, logged: its
  // last line keeps its queued/running state, which every later start completes the same
  // way). Completed entries older than `retention` (at least kMinRecordRetention) are
  // removed. A torn file of the earlier format is reported in the log and left in place for
  // inspection (it does not count toward the bound). DataLoss when a sealed segment does not
  // read to its sealed length: the agent refuses to start rather than forget outcomes.
  absl::Status Recover(absl::Duration retention = kRecordRetention);

  // Removes completed records that completed more than `retention` ago (a `retention` below
  // kMinRecordRetention is raised to it), then the segments no kept record needs. Returns how
  // many records were removed.
  size_t Prune(absl::Duration retention);
  // Prunes with `retention` every `interval` on `timers` until this record is destroyed.
  void PruneEvery(TimerQueue* timers, absl::Duration interval,
                  absl::Duration retention = kRecordRetention);

  // Records held (every state).
  size_t size() const { return entries_.size(); }
  size_t max_records() const { return max_records_; }
  // Bytes of the journal's segments (what the byte bound counts).
  uint64_t journal_bytes() const;
  // Segments on disk, and the newest one's sequence number (0: none) (tests).
  size_t segments() const { return segments_.size(); }
  uint64_t newest_segment() const { return segments_.empty() ? 0 : segments_.rbegin()->first; }
  // The first failure since the last call of a write or removal that Recover, Prune or a
  // segment's removal logged and left for later instead of failing (the agent goes on: a
  // full state disk must not stop it). Tests of crash and fault points ask for it.
  absl::Status TakeDeferredError();

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
  // Where a kept entry's last durable line is: a segment's sequence number, or kLegacy (a
  // file of the earlier format not yet copied into the journal).
  static constexpr uint64_t kLegacy = 0;
  struct Slot {
    RecordEntry entry;
    uint64_t segment = kLegacy;
  };
  struct Segment {
    uint64_t bytes = 0;         // valid bytes (the sealed or read length; what was appended)
    uint64_t header_bytes = 0;  // its header line's
    size_t kept = 0;            // kept entries whose last line is here
  };

  // operations/, opened by its path at each use (created, durably, when missing).
  absl::StatusOr<fs::Dir> Directory();
  // Appends `e`'s line to the current segment (opening one first when needed) and fsyncs it.
  // Sets *segment to where it went.
  absl::Status Write(const RecordEntry& e, uint64_t* segment);
  // Starts a new segment sealing the newest one.
  absl::Status OpenSegment();
  // Moves an entry's last line to `segment` (kept counts).
  void Place(Slot& slot, uint64_t segment);
  // Removes `id` from memory (and its legacy file); its segment may then go.
  void Forget(std::map<std::string, Slot>::iterator it);
  // Unlinks every segment but the newest that no kept entry needs.
  void DropUnneededSegments();
  bool AtBound() const;
  // Keeps the first failure of a removal or write that was logged and left for later.
  void Defer(const absl::Status& st);

  void Index(const RecordEntry& e);
  void Unindex(const RecordEntry& e);
  void SchedulePrune();

  std::string dir_;
  const Clock* clock_;
  size_t max_records_;
  fs::Fs* fs_;
  size_t segment_bytes_;

  std::map<std::string, Slot> entries_;
  // Completed entries by completion time, oldest first (what Prune walks).
  std::set<std::pair<absl::Time, std::string>> completed_;
  // Sandboxes with a successful kill in the record, with how many such kills.
  std::map<std::string, int> killed_;

  // Every segment on disk, by sequence number; the newest is the one a new segment seals.
  std::map<uint64_t, Segment> segments_;
  // The segment being appended to (the newest), if one is open and usable.
  std::unique_ptr<fs::WritableFile> current_;
  uint64_t current_seq_ = 0;
  // The next segment's sequence number (above every name ever seen).
  uint64_t next_seq_ = 1;
  // Names of segments that hold nothing (abandoned creations) to remove.
  std::vector<std::string> abandoned_;
  // The newest segment as Recover found it (0: none, or already sealed by this process): the
  // next segment copies its records and seals it at its header.
  uint64_t recovered_newest_ = 0;
  // Ids whose state Recover completed or copied from the earlier format and could not write
  // yet: the next segment holds them.
  std::set<std::string> pending_writes_;
  absl::Status deferred_;

  TimerQueue* prune_timers_ = nullptr;
  absl::Duration prune_interval_;
  absl::Duration prune_retention_;
  std::unique_ptr<Timer> prune_timer_;
};

// The file name of the journal segment `seq` ("journal-<20 digits>.jsonl").
std::string JournalSegmentName(uint64_t seq);

// The record as it is on disk, read without changing anything (`agent generations`): the
// last state of every id (queued and running entries as they are, nothing expired), and what
// could not be read in `problems`. DataLoss as Recover.
absl::StatusOr<std::vector<RecordEntry>> ReadOperationRecord(fs::Fs& fs, const std::string& dir,
                                                             std::vector<std::string>* problems);

// The record's JSON form (exposed for tests of torn-file handling).
std::string EncodeRecordEntry(const RecordEntry& e);
absl::StatusOr<RecordEntry> DecodeRecordEntry(std::string_view json);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_REQUESTS_OPERATION_RECORD_H_

#include "agent/requests/operation_record.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/requests/operation_journal.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/state/state_files.h"
#include "common/absl_view.h"
#include "common/fs/durable.h"
#include "common/fs/posix_fs.h"
#include "common/json/record.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

using Json = nlohmann::json;

// A record is one file of < 1 KiB (operation_record.h); a larger one is not ours.
constexpr size_t kMaxRecordBytes = 1 << 20;

std::string_view StateName(RecordState s) {
  switch (s) {
    case RecordState::kQueued: return "queued";
    case RecordState::kRunning: return "running";
    case RecordState::kCompleted: return "completed";
  }
  return "queued";
}

wire::RecordedResponse ErrorResponse(const std::string& id, const char* code) {
  wire::RecordedResponse r;
  r.id = id;
  r.error_code = code;
  return r;
}

}  // namespace

wire::RecordedResponse ForRecord(wire::RecordedResponse r) {
  if (r.result.has_value()) {
    if (auto* exec = std::get_if<wire::ExecResult>(&*r.result)) {
      exec->stdout_bytes.clear();
      exec->stderr_bytes.clear();
      exec->truncated = true;
    }
  }
  return r;
}

std::string EncodeRecordEntry(const RecordEntry& e) {
  Json j = {{"id", e.id},
            {"operation", e.operation},
            {"sandbox_id", e.sandbox_id},
            {"generation", e.generation},
            {"state", std::string(StateName(e.state))},
            {"accepted_at_unix_ms", absl::ToUnixMillis(e.accepted_at)}};
  if (e.completed_at) j["completed_at_unix_ms"] = absl::ToUnixMillis(*e.completed_at);
  if (e.response) j["response"] = wire::EncodeRecordedResponse(*e.response);
  return j.dump() + "\n";
}

namespace {

// The record's rules; the codes of common/json/record.h.
absl::StatusOr<RecordEntry> ReadRecordEntry(std::string_view text) {
  ASSIGN_OR_RETURN(json::RecordObject j,
                   json::RecordObject::Parse(text, "operation record", kMaxRecordBytes));
  RecordEntry e;
  ASSIGN_OR_RETURN(e.id, j.String("id"));
  ASSIGN_OR_RETURN(e.operation, j.String("operation"));
  ASSIGN_OR_RETURN(e.sandbox_id, j.String("sandbox_id"));
  ASSIGN_OR_RETURN(std::string state, j.String("state"));
  ASSIGN_OR_RETURN(e.generation, j.Int("generation"));
  ASSIGN_OR_RETURN(int64_t accepted, j.Int("accepted_at_unix_ms"));
  e.accepted_at = absl::FromUnixMillis(accepted);
  if (!wire::IsUuid(e.id)) return j.MemberMalformed("id", "is not a uuid");
  if (state == "queued") {
    e.state = RecordState::kQueued;
  } else if (state == "running") {
    e.state = RecordState::kRunning;
  } else if (state == "completed") {
    e.state = RecordState::kCompleted;
    ASSIGN_OR_RETURN(int64_t done, j.Int("completed_at_unix_ms"));
    e.completed_at = absl::FromUnixMillis(done);
    ASSIGN_OR_RETURN(std::string response, j.String("response"));
    absl::StatusOr<wire::RecordedResponse> r = wire::DecodeRecordedResponse(response);
    if (!r.ok()) return j.MemberMalformed("response", "does not decode");
    e.response = *std::move(r);
  } else {
    return j.MemberMalformed("state", "is not queued, running or completed");
  }
  // Only a completed entry has a completion time and a response.
  RETURN_IF_ERROR(j.Finish());
  return e;
}

}  // namespace

absl::StatusOr<RecordEntry> DecodeRecordEntry(std::string_view text) {
  absl::StatusOr<RecordEntry> e = ReadRecordEntry(text);
  if (!e.ok()) return json::Recoded(e.status(), absl::StatusCode::kDataLoss);
  return e;
}

OperationRecord::OperationRecord(std::string dir, const Clock* clock, size_t max_records,
                                 fs::Fs* fs, size_t segment_bytes)
    : dir_(std::move(dir)),
      clock_(clock),
      max_records_(max_records),
      fs_(fs != nullptr ? fs : fs::PosixFs::Get()),
      segment_bytes_(segment_bytes) {}

OperationRecord::~OperationRecord() {
  if (current_ != nullptr) (void)current_->Close();
}

absl::StatusOr<fs::Dir> OperationRecord::Directory() {
  return fs::OpenOrMakeDirPath(*fs_, dir_, 0700);
}

uint64_t OperationRecord::journal_bytes() const {
  uint64_t n = 0;
  for (const auto& [seq, seg] : segments_) n += seg.bytes;
  return n;
}

absl::Status OperationRecord::OpenSegment() {
  // The segment before is never appended to again, whatever happens below: a new segment
  // (even one whose creation fails) may seal it at its current length.
  if (current_ != nullptr) {
    (void)current_->Close();
    current_.reset();
  }
  ASSIGN_OR_RETURN(fs::Dir dir, Directory());
  const uint64_t seq = next_seq_++;
  const std::string name = journal::SegmentName(seq);
  const std::string tmp = absl::StrCat(".", name, ".tmp.0");
  std::optional<journal::Seal> seals;
  std::vector<std::string> copied;
  std::string body;
  if (!segments_.empty()) {
    const auto& [newest, seg] = *segments_.rbegin();
    if (recovered_newest_ != 0 && newest == recovered_newest_) {
      // The newest segment as the last process left it: what it shows may include appends
      // that never became durable (a kill -9 before their fsync, or an fsync that failed).
      // Its records are copied here and it is sealed at its header: what this start read is
      // then durable in this segment before anything depends on it.
      seals = journal::Seal{newest, seg.header_bytes};
      for (const auto& [id, slot] : entries_) {
        if (slot.segment == newest) copied.push_back(id);
      }
    } else {
      seals = journal::Seal{newest, seg.bytes};
    }
  }
  for (const std::string& id : pending_writes_) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;  // expired meanwhile
    if (it->second.segment != kLegacy && it->second.segment == recovered_newest_) continue;
    copied.push_back(id);
  }
  const std::string header = journal::EncodeHeader(seq, seals);
  body = header;
  for (const std::string& id : copied) body += EncodeRecordEntry(entries_.at(id).entry);
  // Published whole (temporary, fsync, rename, directory fsync): a segment is either absent
  // or its header and copies are all there.
  ASSIGN_OR_RETURN(std::unique_ptr<fs::WritableFile> file,
                   fs_->CreateExclusiveAt(dir, tmp, 0600));
  absl::Status st = file->Append(body);
  if (st.ok()) st = file->Sync();
  if (st.ok()) st = fs_->RenameAt(dir, tmp, name, /*no_replace=*/true);
  if (!st.ok()) {
    (void)file->Close();
    (void)fs_->UnlinkAt(dir, tmp);
    return st;
  }
  st = fs_->SyncDir(dir);
  if (!st.ok()) {
    // Its name may not be durable: never append to it (it holds nothing new).
    (void)file->Close();
    if (!fs_->UnlinkAt(dir, name).ok()) abandoned_.push_back(name);
    return st;
  }
  segments_[seq] = Segment{body.size(), header.size(), 0};
  for (const std::string& id : copied) Place(entries_.at(id), seq);
  if (!pending_writes_.empty()) {
    LogInfo("operation record: records completed or copied at start-up written",
            {{"records", static_cast<uint64_t>(pending_writes_.size())}});
  }
  pending_writes_.clear();
  recovered_newest_ = 0;
  current_ = std::move(file);
  current_seq_ = seq;
  return absl::OkStatus();
}

absl::Status OperationRecord::Write(const RecordEntry& e, uint64_t* segment) {
  if (current_ == nullptr || segments_[current_seq_].bytes >= segment_bytes_) {
    RETURN_IF_ERROR(OpenSegment());
  }
  const std::string line = EncodeRecordEntry(e);
  absl::Status st = current_->Append(line);
  if (st.ok()) st = current_->Sync();
  if (!st.ok()) {
    // Part of the line may be in the file: seal the segment before it now, so that nothing
    // after it is ever read, and never append to it again.
    LogWarning("operation journal: a write failed; the segment is sealed before it",
               {{"segment", journal::SegmentName(current_seq_)}, {"error", std::string(st.message())}});
    (void)current_->Close();
    current_.reset();
    (void)OpenSegment();
    return st;
  }
  segments_[current_seq_].bytes += line.size();
  *segment = current_seq_;
  return absl::OkStatus();
}

void OperationRecord::Place(Slot& slot, uint64_t segment) {
  if (slot.segment != kLegacy) {
    auto it = segments_.find(slot.segment);
    if (it != segments_.end() && it->second.kept > 0) --it->second.kept;
  }
  slot.segment = segment;
  if (segment != kLegacy) ++segments_[segment].kept;
}

void OperationRecord::Forget(std::map<std::string, Slot>::iterator it) {
  Unindex(it->second.entry);
  if (it->second.segment == kLegacy) {
    // A file of the earlier format (its copy could not be written): remove it.
    absl::StatusOr<fs::Dir> dir = Directory();
    Defer(dir.ok() ? fs::RemoveRecord(*fs_, *dir, absl::StrCat(it->first, ".json"))
                   : dir.status());
  } else {
    Place(it->second, kLegacy);
  }
  entries_.erase(it);
}

void OperationRecord::Defer(const absl::Status& st) {
  if (!st.ok() && deferred_.ok()) deferred_ = st;
}

absl::Status OperationRecord::TakeDeferredError() {
  absl::Status st = std::move(deferred_);
  deferred_ = absl::OkStatus();
  return st;
}

bool OperationRecord::AtBound() const {
  return entries_.size() >= max_records_ ||
         journal_bytes() >= static_cast<uint64_t>(max_records_) * kJournalBytesPerRecord;
}

void OperationRecord::DropUnneededSegments() {
  absl::StatusOr<fs::Dir> dir = Directory();
  if (!dir.ok()) {
    Defer(dir.status());
    return;
  }
  bool removed = false;
  for (const std::string& name : abandoned_) {
    absl::Status gone = fs_->UnlinkAt(*dir, name);
    Defer(gone);
    if (gone.ok()) removed = true;
  }
  abandoned_.clear();
  const uint64_t byte_bound = static_cast<uint64_t>(max_records_) * kJournalBytesPerRecord;
  // Only the oldest segments go, in order, so that every segment left but the newest is
  // sealed by a later one that is left too.
  while (segments_.size() > 1) {
    auto oldest = segments_.begin();
    if (oldest->second.kept > 0) {
      // A few records pinning a large old segment while the journal fills: copy them into the
      // current segment (their state as now held: the same a restart would give).
      if (journal_bytes() <= byte_bound / 2 ||
          oldest->second.kept * kJournalBytesPerRecord > oldest->second.bytes / 4) {
        break;
      }
      const uint64_t seq = oldest->first;
      bool copied = true;
      for (auto& [id, slot] : entries_) {
        if (slot.segment != seq) continue;
        uint64_t to = 0;
        if (!Write(slot.entry, &to).ok()) {
          copied = false;
          break;
        }
        Place(slot, to);
      }
      if (!copied || segments_.begin()->first != seq || segments_.begin()->second.kept > 0) {
        break;
      }
      oldest = segments_.begin();
    }
    const std::string name = journal::SegmentName(oldest->first);
    absl::Status st = fs_->UnlinkAt(*dir, name);
    if (!st.ok() && !absl::IsNotFound(st)) {
      LogWarning("operation journal: cannot remove a segment no record needs; keeping it",
                 {{"segment", name}, {"error", std::string(st.message())}});
      Defer(st);
      break;
    }
    segments_.erase(oldest);
    removed = true;
  }
  if (removed) Defer(fs_->SyncDir(*dir));
}

absl::Status OperationRecord::Recover(absl::Duration retention) {
  ASSIGN_OR_RETURN(fs::Dir opened, Directory());
  const fs::Dir* dir = &opened;
  // Its entries durable before any is read: nothing a crash could take back is adopted.
  RETURN_IF_ERROR(fs_->SyncDir(*dir));
  // Temporaries of publications a crash interrupted (earlier format) are never records.
  RETURN_IF_ERROR(fs::RemoveStrayTemporaries(*fs_, *dir));
  ASSIGN_OR_RETURN(journal::JournalRead read, journal::ReadJournal(*fs_, *dir, dir_, nullptr));
  for (const auto& [seq, bytes] : read.segment_bytes) {
    segments_[seq] = Segment{bytes.first, bytes.second, 0};
  }
  next_seq_ = read.max_seq + 1;
  abandoned_ = std::move(read.abandoned);

  const absl::Time now = clock_->Now();
  retention = std::max(retention, kMinRecordRetention);
  std::set<std::string> to_write;  // ids whose state must be written to the journal
  for (journal::JournalRead::Line& l : read.latest) {
    RecordEntry& e = l.entry;
    if (e.state == RecordState::kCompleted && now - *e.completed_at > retention) continue;
    if (e.state != RecordState::kCompleted) {
      // Interrupted by a restart: never started -> unavailable; started -> uncertain.
      e.response = ErrorResponse(
          e.id, e.state == RecordState::kQueued ? "unavailable" : "uncertain");
      e.state = RecordState::kCompleted;
      e.completed_at = now;
      to_write.insert(e.id);
      LogInfo("operation interrupted by a restart completed",
              {{"id", e.id}, {"error_code", *e.response->error_code}});
    } else if (l.segment == kLegacy) {
      to_write.insert(e.id);
    }
    Index(e);
    Slot& slot = entries_[e.id];
    slot.entry = std::move(e);
    Place(slot, l.segment);
  }

  // Every start begins a new segment: it seals the newest one at its header, and holds the
  // newest one's records, the completions above and the copies of earlier-format files.
  if (!read.segment_bytes.empty()) recovered_newest_ = read.segment_bytes.rbegin()->first;
  pending_writes_ = std::move(to_write);
  absl::Status st = OpenSegment();
  if (!st.ok()) {
    // A full or failing state disk must not keep the agent from starting (it would stay
    // disconnected until someone freed space: docs/reliability.md, soak finding 3). What
    // could not be written is held in memory only, and written by the first segment that
    // can be opened; until then the journal still says queued/running, which every later
    // start completes exactly so again, so observe answers the same outcome now and after any
    // restart.
    LogWarning("operation record: interrupted operations completed in memory only (the "
               "journal cannot be written now; the first write that can completes them)",
               {{"error", std::string(st.message())}});
    Defer(st);
  }
  // Files of the earlier format whose state is now in the journal (or expired) go.
  bool removed = false;
  for (const std::string& name : read.legacy) {
    auto it = entries_.find(name.substr(0, 36));
    if (it != entries_.end() && it->second.segment == kLegacy) continue;  // not copied
    absl::Status gone = fs_->UnlinkAt(*dir, name);
    Defer(gone);
    if (gone.ok()) removed = true;
  }
  if (removed) Defer(fs_->SyncDir(*dir));
  DropUnneededSegments();
  return absl::OkStatus();
}

namespace {

bool IsSuccessfulKill(const RecordEntry& e) {
  return e.operation == "kill" && e.state == RecordState::kCompleted && e.response.has_value() &&
         !e.response->error_code.has_value();
}

}  // namespace

void OperationRecord::Index(const RecordEntry& e) {
  if (e.state == RecordState::kCompleted && e.completed_at.has_value()) {
    completed_.insert({*e.completed_at, e.id});
  }
  if (IsSuccessfulKill(e)) ++killed_[e.sandbox_id];
}

void OperationRecord::Unindex(const RecordEntry& e) {
  if (e.state == RecordState::kCompleted && e.completed_at.has_value()) {
    completed_.erase({*e.completed_at, e.id});
  }
  if (IsSuccessfulKill(e)) {
    auto it = killed_.find(e.sandbox_id);
    if (it != killed_.end() && --it->second <= 0) killed_.erase(it);
  }
}

size_t OperationRecord::Prune(absl::Duration retention) {
  retention = std::max(retention, kMinRecordRetention);
  const absl::Time cutoff = clock_->Now() - retention;
  std::vector<std::string> expired;
  for (const auto& [completed_at, id] : completed_) {
    if (completed_at >= cutoff) break;
    expired.push_back(id);
  }
  size_t removed = 0;
  for (const std::string& id : expired) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    Forget(it);
    ++removed;
  }
  DropUnneededSegments();
  if (removed > 0) {
    LogInfo("expired operation records removed",
            {{"removed", static_cast<uint64_t>(removed)},
             {"kept", static_cast<uint64_t>(entries_.size())},
             {"segments", static_cast<uint64_t>(segments_.size())}});
  }
  return removed;
}

void OperationRecord::PruneEvery(TimerQueue* timers, absl::Duration interval,
                                 absl::Duration retention) {
  prune_timers_ = timers;
  prune_interval_ = interval;
  prune_retention_ = retention;
  SchedulePrune();
}

void OperationRecord::SchedulePrune() {
  // The timer is owned by this record: destroying the record cancels it.
  prune_timer_ = prune_timers_->After(prune_interval_, [this] {
    Prune(prune_retention_);
    SchedulePrune();
  });
}

const RecordEntry* OperationRecord::Find(const std::string& id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second.entry;
}

absl::Status OperationRecord::Accept(const std::string& id, std::string_view operation,
                                     const std::string& sandbox_id, int64_t generation) {
  if (AtBound()) {
    // Make room from what the spec lets go: completed records older than 24 hours.
    Prune(kMinRecordRetention);
    if (AtBound()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the operation record holds its maximum (", max_records_, " records, ",
          static_cast<uint64_t>(max_records_) * kJournalBytesPerRecord,
          " journal bytes), none completed more than 24 hours ago"));
    }
  }
  RecordEntry e;
  e.id = id;
  e.operation = std::string(operation);
  e.sandbox_id = sandbox_id;
  e.generation = generation;
  e.state = RecordState::kQueued;
  e.accepted_at = clock_->Now();
  uint64_t segment = 0;
  RETURN_IF_ERROR(Write(e, &segment));
  Slot& slot = entries_[id];
  slot.entry = std::move(e);
  Place(slot, segment);
  return absl::OkStatus();
}

absl::Status OperationRecord::MarkRunning(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return absl::NotFoundError("no such operation");
  RecordEntry e = it->second.entry;
  e.state = RecordState::kRunning;
  uint64_t segment = 0;
  RETURN_IF_ERROR(Write(e, &segment));
  it->second.entry = std::move(e);
  Place(it->second, segment);
  return absl::OkStatus();
}

const char* OperationRecord::CompleteInMemoryAsRecoverWould(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return "uncertain";
  RecordEntry& cur = it->second.entry;
  if (cur.state == RecordState::kCompleted) return "uncertain";  // never: not durable
  RecordEntry e = cur;
  const char* code = e.state == RecordState::kQueued ? "unavailable" : "uncertain";
  e.state = RecordState::kCompleted;
  e.completed_at = clock_->Now();
  e.response = ErrorResponse(id, code);
  Unindex(cur);
  Index(e);
  cur = std::move(e);
  return code;
}

absl::Status OperationRecord::Complete(const std::string& id, wire::RecordedResponse response) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return absl::NotFoundError("no such operation");
  RecordEntry e = it->second.entry;
  e.state = RecordState::kCompleted;
  e.completed_at = clock_->Now();
  e.response = ForRecord(std::move(response));
  uint64_t segment = 0;
  RETURN_IF_ERROR(Write(e, &segment));
  Unindex(it->second.entry);
  Index(e);
  it->second.entry = std::move(e);
  Place(it->second, segment);
  return absl::OkStatus();
}

}  // namespace sn::agent

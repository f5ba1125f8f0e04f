#include "agent/requests/operation_record.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/state/state_files.h"
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
                                 fs::Fs* fs)
    : dir_(std::move(dir)),
      clock_(clock),
      max_records_(max_records),
      fs_(fs != nullptr ? fs : fs::PosixFs::Get()) {}

std::string OperationRecord::PathOf(const std::string& id) const {
  return absl::StrCat(dir_, "/", NameOf(id));
}

std::string OperationRecord::NameOf(const std::string& id) { return absl::StrCat(id, ".json"); }

absl::StatusOr<fs::Dir> OperationRecord::Directory() {
  return fs::OpenOrMakeDirPath(*fs_, dir_, 0700);
}

absl::Status OperationRecord::Persist(const RecordEntry& e) {
  ASSIGN_OR_RETURN(fs::Dir dir, Directory());
  return fs::PublishReplacing(*fs_, dir, NameOf(e.id), EncodeRecordEntry(e));
}

absl::Status OperationRecord::Recover(absl::Duration retention) {
  ASSIGN_OR_RETURN(fs::Dir opened, Directory());
  const fs::Dir* dir = &opened;
  // Its entries durable before any is read: nothing a crash could take back is adopted.
  RETURN_IF_ERROR(fs_->SyncDir(*dir));
  // Temporaries of publications a crash interrupted are never records.
  RETURN_IF_ERROR(fs::RemoveStrayTemporaries(*fs_, *dir));
  ASSIGN_OR_RETURN(std::vector<std::string> listed, fs_->ListDir(*dir));
  std::vector<std::string> names;
  for (std::string& name : listed) {
    if (absl::EndsWith(name, ".json") && name.size() == 36 + 5) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  const absl::Time now = clock_->Now();
  retention = std::max(retention, kMinRecordRetention);
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(dir_, "/", name);
    absl::StatusOr<std::string> text = fs_->ReadFileAt(*dir, name, kMaxRecordBytes, nullptr);
    absl::StatusOr<RecordEntry> e =
        text.ok() ? DecodeRecordEntry(*text) : absl::StatusOr<RecordEntry>(text.status());
    if (!e.ok() || name != NameOf(e->id)) {
      LogError("unreadable operation record left for inspection",
               {{"path", path},
                {"error", e.ok() ? std::string("its id is not its name")
                                 : std::string(e.status().message())}});
      continue;
    }
    if (e->state == RecordState::kCompleted && now - *e->completed_at > retention) {
      if (!fs_->UnlinkAt(*dir, name).ok()) {
        LogWarning("cannot remove an old record", {{"path", path}});
      }
      continue;
    }
    if (e->state != RecordState::kCompleted) {
      // Interrupted by a restart: never started -> unavailable; started -> uncertain.
      e->response = ErrorResponse(
          e->id, e->state == RecordState::kQueued ? "unavailable" : "uncertain");
      e->state = RecordState::kCompleted;
      e->completed_at = now;
      if (absl::Status st = Persist(*e); !st.ok()) {
        // A full or failing state disk must not keep the agent from starting (it would stay
        // disconnected until someone freed space: docs/reliability.md, soak finding 3). The
        // completion is held in memory only; the file still says queued/running, which every
        // later start completes exactly so again, so observe answers the same outcome now
        // and after any restart.
        LogWarning("operation interrupted by a restart completed in memory only: its record "
                   "cannot be written now; the next start completes it the same way",
                   {{"id", e->id},
                    {"error_code", *e->response->error_code},
                    {"error", std::string(st.message())}});
      } else {
        LogInfo("operation interrupted by a restart completed",
                {{"id", e->id}, {"error_code", *e->response->error_code}});
      }
    }
    Index(*e);
    entries_[e->id] = *std::move(e);
  }
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
  size_t removed = 0;
  std::vector<std::string> expired;
  for (const auto& [completed_at, id] : completed_) {
    if (completed_at >= cutoff) break;
    expired.push_back(id);
  }
  absl::StatusOr<fs::Dir> dir = Directory();
  for (const std::string& id : expired) {
    const std::string path = PathOf(id);
    absl::Status removed_file =
        dir.ok() ? fs_->UnlinkAt(*dir, NameOf(id)) : absl::Status(dir.status());
    if (!removed_file.ok() && !absl::IsNotFound(removed_file)) {
      LogWarning("cannot remove an expired operation record; keeping it",
                 {{"path", path}, {"error", std::string(removed_file.message())}});
      continue;
    }
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    Unindex(it->second);
    entries_.erase(it);
    ++removed;
  }
  if (removed > 0) {
    LogInfo("expired operation records removed",
            {{"removed", static_cast<uint64_t>(removed)},
             {"kept", static_cast<uint64_t>(entries_.size())}});
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
  return it == entries_.end() ? nullptr : &it->second;
}

absl::Status OperationRecord::Accept(const std::string& id, std::string_view operation,
                                     const std::string& sandbox_id, int64_t generation) {
  if (entries_.size() >= max_records_) {
    // Make room from what the spec lets go: completed records older than 24 hours.
    Prune(kMinRecordRetention);
    if (entries_.size() >= max_records_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the operation record holds its maximum of ", max_records_,
          " records, none completed more than 24 hours ago"));
    }
  }
  RecordEntry e;
  e.id = id;
  e.operation = std::string(operation);
  e.sandbox_id = sandbox_id;
  e.generation = generation;
  e.state = RecordState::kQueued;
  e.accepted_at = clock_->Now();
  RETURN_IF_ERROR(Persist(e));
  entries_[id] = std::move(e);
  return absl::OkStatus();
}

absl::Status OperationRecord::MarkRunning(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return absl::NotFoundError("no such operation");
  RecordEntry e = it->second;
  e.state = RecordState::kRunning;
  RETURN_IF_ERROR(Persist(e));
  it->second = std::move(e);
  return absl::OkStatus();
}

const char* OperationRecord::CompleteInMemoryAsRecoverWould(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return "uncertain";
  if (it->second.state == RecordState::kCompleted) return "uncertain";  // never: not durable
  RecordEntry e = it->second;
  const char* code = e.state == RecordState::kQueued ? "unavailable" : "uncertain";
  e.state = RecordState::kCompleted;
  e.completed_at = clock_->Now();
  e.response = ErrorResponse(id, code);
  Unindex(it->second);
  Index(e);
  it->second = std::move(e);
  return code;
}

absl::Status OperationRecord::Complete(const std::string& id, wire::RecordedResponse response) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return absl::NotFoundError("no such operation");
  RecordEntry e = it->second;
  e.state = RecordState::kCompleted;
  e.completed_at = clock_->Now();
  e.response = ForRecord(std::move(response));
  RETURN_IF_ERROR(Persist(e));
  Unindex(it->second);
  Index(e);
  it->second = std::move(e);
  return absl::OkStatus();
}

}  // namespace sn::agent

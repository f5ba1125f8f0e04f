#include "agent/operation_record.h"

#include <dirent.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/state_files.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

using json = nlohmann::json;

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
  json j = {{"id", e.id},
            {"operation", e.operation},
            {"sandbox_id", e.sandbox_id},
            {"generation", e.generation},
            {"state", std::string(StateName(e.state))},
            {"accepted_at_unix_ms", absl::ToUnixMillis(e.accepted_at)}};
  if (e.completed_at) j["completed_at_unix_ms"] = absl::ToUnixMillis(*e.completed_at);
  if (e.response) j["response"] = wire::EncodeRecordedResponse(*e.response);
  return j.dump() + "\n";
}

absl::StatusOr<RecordEntry> DecodeRecordEntry(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("not a JSON object");
  RecordEntry e;
  auto str = [&](const char* k, std::string* out) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  std::string state;
  if (!str("id", &e.id) || !str("operation", &e.operation) ||
      !str("sandbox_id", &e.sandbox_id) || !str("state", &state)) {
    return absl::DataLossError("missing or mistyped member");
  }
  if (!IsCanonicalUuid(e.id)) return absl::DataLossError("id is not a uuid");
  auto gen = j.find("generation");
  auto acc = j.find("accepted_at_unix_ms");
  if (gen == j.end() || !gen->is_number_integer() || acc == j.end() ||
      !acc->is_number_integer()) {
    return absl::DataLossError("missing generation or accepted_at");
  }
  e.generation = gen->get<int64_t>();
  e.accepted_at = absl::FromUnixMillis(acc->get<int64_t>());
  if (state == "queued") {
    e.state = RecordState::kQueued;
  } else if (state == "running") {
    e.state = RecordState::kRunning;
  } else if (state == "completed") {
    e.state = RecordState::kCompleted;
    auto done = j.find("completed_at_unix_ms");
    auto resp = j.find("response");
    if (done == j.end() || !done->is_number_integer() || resp == j.end() ||
        !resp->is_string()) {
      return absl::DataLossError("completed entry without completion time or response");
    }
    e.completed_at = absl::FromUnixMillis(done->get<int64_t>());
    absl::StatusOr<wire::RecordedResponse> r =
        wire::DecodeRecordedResponse(resp->get<std::string>());
    if (!r.ok()) return absl::DataLossError("recorded response does not decode");
    e.response = *std::move(r);
  } else {
    return absl::DataLossError("unknown state");
  }
  return e;
}

OperationRecord::OperationRecord(std::string dir, const Clock* clock)
    : dir_(std::move(dir)), clock_(clock) {}

std::string OperationRecord::PathOf(const std::string& id) const {
  return absl::StrCat(dir_, "/", id, ".json");
}

absl::Status OperationRecord::Persist(const RecordEntry& e) {
  return WriteFileAtomically(PathOf(e.id), EncodeRecordEntry(e), 0600);
}

absl::Status OperationRecord::Recover(absl::Duration retention) {
  RETURN_IF_ERROR(MakeDirs(dir_, 0700));
  std::vector<std::string> names;
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return ErrnoStatus(errno, absl::StrCat("opendir ", dir_));
  while (dirent* ent = readdir(d)) {
    std::string name = ent->d_name;
    if (absl::EndsWith(name, ".json") && name.size() == 36 + 5) names.push_back(name);
  }
  closedir(d);
  const absl::Time now = clock_->Now();
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(dir_, "/", name);
    absl::StatusOr<std::string> text = ReadSmallFile(path, 1 << 20);
    absl::StatusOr<RecordEntry> e =
        text.ok() ? DecodeRecordEntry(*text) : absl::StatusOr<RecordEntry>(text.status());
    if (!e.ok() || name != absl::StrCat(e->id, ".json")) {
      LogError("unreadable operation record left for inspection", {{"path", path}});
      continue;
    }
    if (e->state == RecordState::kCompleted && now - *e->completed_at > retention) {
      if (unlink(path.c_str()) != 0) LogWarning("cannot remove an old record", {{"path", path}});
      continue;
    }
    if (e->state != RecordState::kCompleted) {
      // Interrupted by a restart: never started -> unavailable; started -> uncertain.
      e->response = ErrorResponse(
          e->id, e->state == RecordState::kQueued ? "unavailable" : "uncertain");
      e->state = RecordState::kCompleted;
      e->completed_at = now;
      RETURN_IF_ERROR(Persist(*e));
      LogInfo("operation interrupted by a restart completed",
              {{"id", e->id}, {"error_code", *e->response->error_code}});
    }
    Index(*e);
    entries_[e->id] = *std::move(e);
  }
  return absl::OkStatus();
}

void OperationRecord::Index(const RecordEntry& e) {
  if (e.operation == "kill" && e.state == RecordState::kCompleted && e.response.has_value() &&
      !e.response->error_code.has_value()) {
    killed_.insert(e.sandbox_id);
  }
}

const RecordEntry* OperationRecord::Find(const std::string& id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

absl::Status OperationRecord::Accept(const std::string& id, std::string_view operation,
                                     const std::string& sandbox_id, int64_t generation) {
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

absl::Status OperationRecord::Complete(const std::string& id, wire::RecordedResponse response) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return absl::NotFoundError("no such operation");
  RecordEntry e = it->second;
  e.state = RecordState::kCompleted;
  e.completed_at = clock_->Now();
  e.response = ForRecord(std::move(response));
  RETURN_IF_ERROR(Persist(e));
  Index(e);
  it->second = std::move(e);
  return absl::OkStatus();
}

}  // namespace sn::agent

#include "privhelper/rpc/sandbox_fence.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/wire/validate.h"

namespace sn::privhelper {
namespace {

constexpr char kBootIdPath[] = "/proc/sys/kernel/random/boot_id";
constexpr char kBootIdVariable[] = "SN_BOOT_ID";

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool IsDecimal(std::string_view s, size_t max_digits) {
  return !s.empty() && s.size() <= max_digits && (s.size() == 1 || s[0] != '0') &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

MonoTime FromNs(int64_t ns) { return absl::Nanoseconds(ns); }
int64_t ToNs(MonoTime t) { return absl::ToInt64Nanoseconds(t); }

}  // namespace

// ---- Entry ----------------------------------------------------------------------------------

SandboxFence::Entry::~Entry() {
  if (fence_ != nullptr) fence_->Release(sandbox_);
}

void SandboxFence::Entry::HoldUntil(MonoTime until) {
  if (fence_ == nullptr) return;
  fence_->Hold(sandbox_, until);
  fence_ = nullptr;  // the fence ends it now, at `until`
}

// ---- records --------------------------------------------------------------------------------

std::string SandboxFence::RecordName(const Record& r) {
  return absl::StrCat(r.sandbox_id, ".", r.generation, ".", r.boot_id, ".", r.end_ns);
}

std::optional<SandboxFence::Record> SandboxFence::ParseRecordName(std::string_view name) {
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    const size_t dot = name.find('.', at);
    parts.push_back(name.substr(at, dot == std::string_view::npos ? dot : dot - at));
    if (dot == std::string_view::npos) break;
    at = dot + 1;
  }
  if (parts.size() != 4) return std::nullopt;
  auto number = [](std::string_view s, int64_t* out) {
    return IsDecimal(s, 18) &&
           std::from_chars(s.data(), s.data() + s.size(), *out).ec == std::errc();
  };
  Record r;
  if (!wire::IsUuid(parts[0])) return std::nullopt;
  if (!number(parts[1], &r.generation) || r.generation <= 0) return std::nullopt;
  if (parts[2].size() != 32 || !IsLowerHex(parts[2])) return std::nullopt;
  if (!number(parts[3], &r.end_ns)) return std::nullopt;
  r.sandbox_id = std::string(parts[0]);
  r.boot_id = std::string(parts[2]);
  return r;
}

absl::StatusOr<std::string> SandboxFence::ReadBootId() {
  auto normalized = [](std::string_view raw) -> std::optional<std::string> {
    std::string id;
    for (char c : raw) {
      if (c != '-' && c != '\n') id.push_back(absl::ascii_tolower(c));
    }
    if (id.size() != 32 || !IsLowerHex(id)) return std::nullopt;
    return id;
  };
  int fd = open(kBootIdPath, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n > 0) {
      if (auto id = normalized(std::string_view(buf, static_cast<size_t>(n)))) return *id;
    }
    return absl::UnavailableError(absl::StrCat(kBootIdPath, ": not a boot id"));
  }
  // The unit's ProcSubset=pid hides /proc/sys: systemd passes the boot id (%b) instead.
  const int open_errno = errno;
  if (const char* env = getenv(kBootIdVariable); env != nullptr) {
    if (auto id = normalized(env)) return *id;
    return absl::UnavailableError(absl::StrCat(kBootIdVariable, " is not a boot id"));
  }
  return absl::UnavailableError(absl::StrCat(kBootIdPath, ": ", strerror(open_errno),
                                             ", and ", kBootIdVariable, " is not set"));
}

// ---- the fence ------------------------------------------------------------------------------

SandboxFence::SandboxFence(fs::Fs* fs, fs::Dir dir, std::string boot_id, const Clock* clock,
                           int64_t max_entries)
    : fs_(fs),
      dir_(std::move(dir)),
      boot_id_(std::move(boot_id)),
      clock_(clock != nullptr ? clock : SystemClock::Get()),
      max_entries_(std::max<int64_t>(1, max_entries)) {}

absl::StatusOr<std::unique_ptr<SandboxFence>> SandboxFence::Open(fs::Fs* fs,
                                                                  const fs::Dir& state,
                                                                  std::string boot_id,
                                                                  const Clock* clock,
                                                                  int64_t max_entries) {
  if (boot_id.size() != 32 || !IsLowerHex(boot_id)) {
    return absl::InvalidArgumentError("boot_id must be 32 lowercase hex digits");
  }
  absl::StatusOr<fs::Dir> dir = fs->OpenDirAt(state, kDirName);
  if (absl::IsNotFound(dir.status())) {
    if (absl::Status made = fs->MakeDirAt(state, kDirName, 0700); !made.ok()) return made;
    dir = fs->OpenDirAt(state, kDirName);
  }
  if (!dir.ok()) return dir.status();
  absl::StatusOr<fs::FileInfo> info = fs->StatDir(*dir);
  if (!info.ok()) return info.status();
  if ((info->mode & 07777) != 0700) {
    return absl::FailedPreconditionError(
        absl::StrCat(kDirName, "/ of the state directory must have mode 0700"));
  }
  absl::StatusOr<std::vector<std::string>> names = fs->ListDir(*dir);
  if (!names.ok()) return names.status();
  std::unique_ptr<SandboxFence> f(
      new SandboxFence(fs, *std::move(dir), std::move(boot_id), clock, max_entries));
  const MonoTime now = f->clock_->Monotonic();
  absl::MutexLock lock(&f->mu_);
  for (const std::string& name : *names) {
    std::optional<Record> r = ParseRecordName(name);
    if (!r.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "state directory entry ", kDirName, "/", name,
          " is not a sandbox fence record (privhelper creates nothing else there): remove it"));
    }
    const MonoTime end = FromNs(r->end_ns);
    if (r->boot_id != f->boot_id_ || end <= now) {
      // An earlier boot's (its requests died with the machine) or an ended one.
      if (absl::Status s = fs->UnlinkAt(f->dir_, name); !s.ok() && !absl::IsNotFound(s)) {
        return s;
      }
      continue;
    }
    auto [it, fresh] = f->fenced_.try_emplace(r->sandbox_id);
    Held& e = it->second;
    if (!fresh && e.recorded_end >= end) {
      // Two records of one sandbox (never written so; kept safe): the later end wins.
      if (absl::Status s = fs->UnlinkAt(f->dir_, name); !s.ok() && !absl::IsNotFound(s)) {
        return s;
      }
      continue;
    }
    if (!fresh) {
      if (absl::Status s = fs->UnlinkAt(f->dir_, e.record); !s.ok() && !absl::IsNotFound(s)) {
        return s;
      }
    }
    e.generation = r->generation;
    e.record = name;
    e.recorded_end = end;
    e.held_until = end;
  }
  if (!f->fenced_.empty()) {
    LogInfo("sandbox fence: creates of an earlier privhelper may still land",
            {{"sandboxes", static_cast<int64_t>(f->fenced_.size())}});
  }
  return f;
}

void SandboxFence::RemoveRecordLocked(Held* f) {
  if (f->record.empty()) return;
  if (absl::Status s = fs_->UnlinkAt(dir_, f->record); !s.ok() && !absl::IsNotFound(s)) {
    // The record outlives its entry: the next start fences the sandbox until the recorded end,
    // which is only conservative.
    LogWarning("sandbox fence: cannot remove a record", {{"record", f->record},
                                                         {"error", s.ToString()}});
  }
  f->record.clear();
}

void SandboxFence::PurgeLocked() {
  const MonoTime now = clock_->Monotonic();
  for (auto it = fenced_.begin(); it != fenced_.end();) {
    Held& f = it->second;
    if (f.held_until.has_value() && *f.held_until <= now) {
      RemoveRecordLocked(&f);
      it = fenced_.erase(it);
    } else {
      ++it;
    }
  }
}

std::variant<SandboxFence::Entry, SandboxFence::Refused> SandboxFence::Enter(
    const std::string& sandbox_id, int64_t generation, MonoTime may_act_until) {
  absl::MutexLock lock(&mu_);
  PurgeLocked();  // what remains is fenced now
  if (fenced_.count(sandbox_id) > 0) return Refused::kBusy;
  if (static_cast<int64_t>(fenced_.size()) >= max_entries_) return Refused::kFull;
  const MonoTime end = may_act_until + kNativeSettle;
  const std::string name = RecordName(Record{sandbox_id, generation, boot_id_, ToNs(end)});
  absl::StatusOr<std::unique_ptr<fs::WritableFile>> file =
      fs_->CreateExclusiveAt(dir_, name, 0600);
  if (!file.ok()) {
    LogWarning("sandbox fence: cannot create a record", {{"error", file.status().ToString()}});
    return Refused::kRecordFailed;
  }
  (void)(*file)->Close();  // empty: the name is the record
  Held& f = fenced_[sandbox_id];
  f.generation = generation;
  f.record = name;
  f.recorded_end = end;
  f.held_until.reset();
  return Entry(this, sandbox_id);
}

void SandboxFence::Release(const std::string& sandbox) {
  absl::MutexLock lock(&mu_);
  auto it = fenced_.find(sandbox);
  if (it == fenced_.end()) return;
  RemoveRecordLocked(&it->second);
  fenced_.erase(it);
}

void SandboxFence::Hold(const std::string& sandbox, MonoTime until) {
  absl::MutexLock lock(&mu_);
  auto it = fenced_.find(sandbox);
  if (it == fenced_.end()) return;
  it->second.held_until = std::min(until, it->second.recorded_end);
}

bool SandboxFence::Fenced(const std::string& sandbox_id) {
  absl::MutexLock lock(&mu_);
  PurgeLocked();
  return fenced_.count(sandbox_id) > 0;
}

void SandboxFence::SawSandbox(const std::string& sandbox_id) {
  absl::MutexLock lock(&mu_);
  auto it = fenced_.find(sandbox_id);
  if (it == fenced_.end() || !it->second.held_until.has_value()) return;  // in flight: its own
  RemoveRecordLocked(&it->second);
  fenced_.erase(it);
}

bool SandboxFence::HoldsGeneration(int64_t generation) {
  absl::MutexLock lock(&mu_);
  PurgeLocked();
  return std::any_of(fenced_.begin(), fenced_.end(),
                     [&](const auto& e) { return e.second.generation == generation; });
}

int64_t SandboxFence::size() {
  absl::MutexLock lock(&mu_);
  PurgeLocked();
  return static_cast<int64_t>(fenced_.size());
}

}  // namespace sn::privhelper

// FaultFs: construction, snapshots, the power loss and the kill, link counts, and the test's
// own changes to the tree.
#include <cerrno>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"
#include "tests/fakes/fault_fs.h"

namespace sn::fs {
namespace {

// Every node reachable from `root` through `entries` (the volatile tree).
std::set<uint64_t> Reachable(const FaultFs::Image& image) {
  std::set<uint64_t> seen{image.root};
  std::vector<uint64_t> todo{image.root};
  while (!todo.empty()) {
    const uint64_t d = todo.back();
    todo.pop_back();
    for (const auto& [name, ino] : image.nodes.at(d).entries) {
      if (!seen.insert(ino).second) continue;
      if (image.nodes.at(ino).type == FileType::kDirectory) todo.push_back(ino);
    }
  }
  return seen;
}

const char* TypeName(FileType t) {
  switch (t) {
    case FileType::kRegular: return "file";
    case FileType::kDirectory: return "dir";
    case FileType::kSymlink: return "symlink";
    case FileType::kSocket: return "socket";
    case FileType::kOther: return "other";
  }
  return "?";
}

}  // namespace

FaultFs::FaultFs(Options options) : options_(options) {
  absl::MutexLock l(&mu_);
  Node& root = image_.nodes[image_.root];
  root.type = FileType::kDirectory;
  root.mode = 0700;
  root.uid = options_.uid;
  root.gid = options_.gid;
  root.nlink = 2;
}

FaultFs::FaultFs(Options options, Image image) : options_(options) {
  absl::MutexLock l(&mu_);
  image_ = std::move(image);
  CollectGarbage();  // files only the image's dead process still held open
}

FaultFs::~FaultFs() = default;

FaultFs::Image FaultFs::Snapshot() const {
  absl::MutexLock l(&mu_);
  return image_;
}

size_t FaultFs::PendingDirOps() const {
  absl::MutexLock l(&mu_);
  return image_.pending.size();
}

bool FaultFs::HasUnsyncedData() const {
  absl::MutexLock l(&mu_);
  for (const auto& [ino, n] : image_.nodes) {
    if (n.type == FileType::kRegular && n.data != n.durable_data) return true;
  }
  return false;
}

uint64_t FaultFs::BytesUsed() const {
  absl::MutexLock l(&mu_);
  return BytesUsedLocked();
}

uint64_t FaultFs::BytesUsedLocked() const {
  std::set<uint64_t> live = Reachable(image_);
  for (const auto& [ino, count] : open_writers_) live.insert(ino);
  for (const auto& [ino, count] : open_readers_) live.insert(ino);
  uint64_t total = 0;
  for (uint64_t ino : live) {
    const Node& n = image_.nodes.at(ino);
    if (n.type == FileType::kRegular) total += n.data.size();
  }
  return total;
}

void FaultFs::RecountLinks() {
  for (auto& [ino, n] : image_.nodes) n.nlink = n.type == FileType::kDirectory ? 2 : 0;
  for (auto& [ino, n] : image_.nodes) {
    if (n.type != FileType::kDirectory) continue;
    for (const auto& [name, child] : n.entries) {
      Node& c = image_.nodes.at(child);
      if (c.type == FileType::kDirectory) {
        ++n.nlink;  // the child's ".."
      } else {
        ++c.nlink;
      }
    }
  }
}

std::string FaultFs::PathOf(uint64_t dir) const {
  if (dir == image_.root) return ".";
  // Directories have one parent: search the tree (small in tests).
  std::vector<std::pair<uint64_t, std::string>> todo{{image_.root, "."}};
  while (!todo.empty()) {
    auto [d, path] = todo.back();
    todo.pop_back();
    for (const auto& [name, ino] : image_.nodes.at(d).entries) {
      if (image_.nodes.at(ino).type != FileType::kDirectory) continue;
      std::string p = path == "." ? name : absl::StrCat(path, "/", name);
      if (ino == dir) return p;
      todo.push_back({ino, std::move(p)});
    }
  }
  return absl::StrCat("<unlinked directory ", dir, ">");
}

void FaultFs::CollectGarbage() {
  std::set<uint64_t> held{image_.root};
  for (const auto& [ino, n] : image_.nodes) {
    if (n.type != FileType::kDirectory) continue;
    for (const auto& [name, child] : n.entries) held.insert(child);
    for (const auto& [name, child] : n.durable_entries) held.insert(child);
  }
  for (const DirOp& op : image_.pending) {
    for (const auto& [name, child] : op.set) held.insert(child);
  }
  for (const auto& [ino, count] : open_writers_) held.insert(ino);
  for (const auto& [ino, count] : open_readers_) held.insert(ino);
  for (const auto& [ino, state] : locks_) held.insert(ino);
  for (auto it = image_.nodes.begin(); it != image_.nodes.end();) {
    if (held.contains(it->first)) {
      ++it;
    } else {
      image_.free_inos.insert(it->first);
      it = image_.nodes.erase(it);
    }
  }
}

void FaultFs::NewProcess() {
  ++epoch_;
  dir_handles_.clear();
  open_writers_.clear();
  open_readers_.clear();
  locks_.clear();
  steps_ = 0;
  step_log_.clear();
  fail_step_ = 0;
  fail_status_ = absl::OkStatus();
  sync_status_ = absl::OkStatus();
  byte_budget_.reset();
  crash_step_ = 0;
  faults_injected_ = 0;
  bytes_appended_ = 0;
  crashed_ = false;
}

void FaultFs::KillProcess() {
  absl::MutexLock l(&mu_);
  NewProcess();
}

void FaultFs::Crash(CrashOptions options) {
  absl::MutexLock l(&mu_);
  // Directories: what was synced, plus the first `persisted_metadata_ops` later operations.
  for (auto& [ino, n] : image_.nodes) {
    if (n.type == FileType::kDirectory) n.entries = n.durable_entries;
  }
  const size_t persisted = std::min(options.persisted_metadata_ops, image_.pending.size());
  for (size_t i = 0; i < persisted; ++i) {
    const DirOp& op = image_.pending[i];
    Node& d = image_.nodes.at(op.dir);
    for (const std::string& n : op.erase) d.entries.erase(n);
    for (const auto& [n, ino] : op.set) d.entries[n] = ino;
  }
  image_.pending.clear();
  for (auto& [ino, n] : image_.nodes) {
    if (n.type == FileType::kDirectory) n.durable_entries = n.entries;
  }
  // Files: what was synced, plus (unless a sync failed) none, half or all of the rest. The
  // durable contents are always a prefix of the volatile ones (files are only appended to).
  for (auto& [ino, n] : image_.nodes) {
    if (n.type != FileType::kRegular) continue;
    if (!n.sync_failed && n.data.size() > n.durable_data.size()) {
      const std::string tail = n.data.substr(n.durable_data.size());
      if (options.data == UnsyncedData::kTorn) n.durable_data += tail.substr(0, tail.size() / 2);
      if (options.data == UnsyncedData::kKept) n.durable_data += tail;
    }
    n.data = n.durable_data;
    n.sync_failed = false;
  }
  // Whatever the surviving tree does not reach is gone (and its inode number free).
  const std::set<uint64_t> live = Reachable(image_);
  for (auto it = image_.nodes.begin(); it != image_.nodes.end();) {
    if (live.contains(it->first)) {
      ++it;
    } else {
      image_.free_inos.insert(it->first);
      it = image_.nodes.erase(it);
    }
  }
  RecountLinks();
  NewProcess();
}

// ---- the test's hand -----------------------------------------------------------------------

absl::StatusOr<std::pair<uint64_t, std::string>> FaultFs::Resolve(std::string_view path) const {
  std::vector<std::string> parts = absl::StrSplit(AV(path), '/', absl::SkipEmpty());
  if (parts.empty()) return absl::InvalidArgumentError("empty path");
  uint64_t dir = image_.root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    auto it = image_.nodes.at(dir).entries.find(parts[i]);
    if (it == image_.nodes.at(dir).entries.end()) return ErrnoStatus(ENOENT, parts[i]);
    if (image_.nodes.at(it->second).type != FileType::kDirectory) {
      return ErrnoStatus(ENOTDIR, parts[i]);
    }
    dir = it->second;
  }
  return std::make_pair(dir, parts.back());
}

absl::StatusOr<Dir> FaultFs::OpenPath(std::string_view path) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  uint64_t dir = image_.root;
  for (absl::string_view part : absl::StrSplit(AV(path), '/', absl::SkipEmpty())) {
    const std::string name(part);
    auto it = image_.nodes.at(dir).entries.find(name);
    if (it == image_.nodes.at(dir).entries.end()) {
      return ErrnoStatus(ENOENT, absl::StrCat("open directory ", AV(path)));
    }
    if (image_.nodes.at(it->second).type != FileType::kDirectory) {
      return ErrnoStatus(ENOTDIR, absl::StrCat("open directory ", AV(path)));
    }
    dir = it->second;
  }
  const int h = next_handle_++;
  dir_handles_[h] = dir;
  return Dir(this, h);
}

absl::Status FaultFs::MakeDirs(std::string_view path, uint32_t mode) {
  absl::MutexLock l(&mu_);
  uint64_t dir = image_.root;
  for (absl::string_view part : absl::StrSplit(AV(path), '/', absl::SkipEmpty())) {
    const std::string name(part);
    auto it = image_.nodes.at(dir).entries.find(name);
    if (it == image_.nodes.at(dir).entries.end()) {
      const uint64_t ino = NewNode(FileType::kDirectory, mode);
      Apply({dir, {}, {{name, ino}}});
      SyncDirLocked(dir);
      dir = ino;
    } else if (image_.nodes.at(it->second).type == FileType::kDirectory) {
      dir = it->second;
    } else {
      return ErrnoStatus(ENOTDIR, name);
    }
  }
  return absl::OkStatus();
}

absl::Status FaultFs::WriteFile(std::string_view path, std::string_view bytes, uint32_t mode) {
  absl::MutexLock l(&mu_);
  absl::StatusOr<std::pair<uint64_t, std::string>> r = Resolve(path);
  if (!r.ok()) return r.status();
  const uint64_t ino = NewNode(FileType::kRegular, mode);
  Node& n = image_.nodes.at(ino);
  n.data = n.durable_data = std::string(bytes);
  Apply({r->first, {}, {{r->second, ino}}});
  SyncDirLocked(r->first);
  return absl::OkStatus();
}

absl::Status FaultFs::SetOwner(std::string_view path, uint32_t uid, uint32_t gid) {
  absl::MutexLock l(&mu_);
  uint64_t ino = image_.root;
  if (!path.empty() && path != ".") {
    absl::StatusOr<std::pair<uint64_t, std::string>> r = Resolve(path);
    if (!r.ok()) return r.status();
    absl::StatusOr<uint64_t> found = Lookup(r->first, r->second);
    if (!found.ok()) return found.status();
    ino = *found;
  }
  image_.nodes.at(ino).uid = uid;
  image_.nodes.at(ino).gid = gid;
  return absl::OkStatus();
}

absl::Status FaultFs::SetMode(std::string_view path, uint32_t mode) {
  absl::MutexLock l(&mu_);
  uint64_t ino = image_.root;
  if (!path.empty() && path != ".") {
    absl::StatusOr<std::pair<uint64_t, std::string>> r = Resolve(path);
    if (!r.ok()) return r.status();
    absl::StatusOr<uint64_t> found = Lookup(r->first, r->second);
    if (!found.ok()) return found.status();
    ino = *found;
  }
  image_.nodes.at(ino).mode = mode & 07777;
  return absl::OkStatus();
}

absl::Status FaultFs::Symlink(std::string_view path, std::string_view target) {
  absl::MutexLock l(&mu_);
  absl::StatusOr<std::pair<uint64_t, std::string>> r = Resolve(path);
  if (!r.ok()) return r.status();
  if (Lookup(r->first, r->second).ok()) return ErrnoStatus(EEXIST, r->second);
  const uint64_t ino = NewNode(FileType::kSymlink, 0777);
  image_.nodes.at(ino).data = image_.nodes.at(ino).durable_data = std::string(target);
  Apply({r->first, {}, {{r->second, ino}}});
  SyncDirLocked(r->first);
  return absl::OkStatus();
}

absl::Status FaultFs::Link(std::string_view existing, std::string_view path) {
  absl::MutexLock l(&mu_);
  absl::StatusOr<std::pair<uint64_t, std::string>> from = Resolve(existing);
  if (!from.ok()) return from.status();
  absl::StatusOr<uint64_t> ino = Lookup(from->first, from->second);
  if (!ino.ok()) return ino.status();
  if (image_.nodes.at(*ino).type == FileType::kDirectory) return ErrnoStatus(EPERM, "link");
  absl::StatusOr<std::pair<uint64_t, std::string>> r = Resolve(path);
  if (!r.ok()) return r.status();
  if (Lookup(r->first, r->second).ok()) return ErrnoStatus(EEXIST, r->second);
  Apply({r->first, {}, {{r->second, *ino}}});
  SyncDirLocked(r->first);
  return absl::OkStatus();
}

absl::Status FaultFs::MakeSocket(std::string_view path) {
  absl::MutexLock l(&mu_);
  absl::StatusOr<std::pair<uint64_t, std::string>> r = Resolve(path);
  if (!r.ok()) return r.status();
  if (Lookup(r->first, r->second).ok()) return ErrnoStatus(EEXIST, r->second);
  const uint64_t ino = NewNode(FileType::kSocket, 0755);
  Apply({r->first, {}, {{r->second, ino}}});
  SyncDirLocked(r->first);
  return absl::OkStatus();
}

absl::Status FaultFs::Remove(std::string_view path) {
  absl::MutexLock l(&mu_);
  absl::StatusOr<std::pair<uint64_t, std::string>> r = Resolve(path);
  if (!r.ok()) return r.status();
  if (!Lookup(r->first, r->second).ok()) return ErrnoStatus(ENOENT, r->second);
  Apply({r->first, {r->second}, {}});
  SyncDirLocked(r->first);
  return absl::OkStatus();
}

absl::StatusOr<std::string> FaultFs::Contents(std::string_view path) const {
  absl::MutexLock l(&mu_);
  absl::StatusOr<std::pair<uint64_t, std::string>> r = Resolve(path);
  if (!r.ok()) return r.status();
  absl::StatusOr<uint64_t> ino = Lookup(r->first, r->second);
  if (!ino.ok()) return ino.status();
  if (image_.nodes.at(*ino).type != FileType::kRegular) {
    return absl::FailedPreconditionError(absl::StrCat(AV(path), " is not a regular file"));
  }
  return image_.nodes.at(*ino).data;
}

absl::StatusOr<std::vector<std::string>> FaultFs::Names(std::string_view path) const {
  absl::MutexLock l(&mu_);
  uint64_t dir = image_.root;
  if (!path.empty() && path != ".") {
    absl::StatusOr<std::pair<uint64_t, std::string>> r = Resolve(path);
    if (!r.ok()) return r.status();
    absl::StatusOr<uint64_t> ino = Lookup(r->first, r->second);
    if (!ino.ok()) return ino.status();
    if (image_.nodes.at(*ino).type != FileType::kDirectory) return ErrnoStatus(ENOTDIR, r->second);
    dir = *ino;
  }
  std::vector<std::string> out;
  for (const auto& [n, ino] : image_.nodes.at(dir).entries) out.push_back(n);
  return out;
}

std::string FaultFs::Dump() const {
  absl::MutexLock l(&mu_);
  std::string out;
  std::vector<std::pair<uint64_t, std::string>> todo{{image_.root, "."}};
  while (!todo.empty()) {
    auto [d, path] = todo.back();
    todo.pop_back();
    for (const auto& [name, ino] : image_.nodes.at(d).entries) {
      const Node& n = image_.nodes.at(ino);
      const std::string p = path == "." ? name : absl::StrCat(path, "/", name);
      absl::StrAppendFormat(&out, "%s %s 0%o uid=%d links=%d ino=%d", p, TypeName(n.type),
                            n.mode, n.uid, n.nlink, ino);
      if (n.type == FileType::kRegular) {
        absl::StrAppendFormat(&out, " bytes=%d durable=%d%s", n.data.size(),
                              n.durable_data.size(), n.sync_failed ? " sync-failed" : "");
      }
      if (!image_.nodes.at(d).durable_entries.contains(name)) out += " (entry not durable)";
      out += "\n";
      if (n.type == FileType::kDirectory) todo.push_back({ino, p});
    }
  }
  return out;
}

}  // namespace sn::fs

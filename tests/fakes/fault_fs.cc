// FaultFs: the Fs calls, the files and locks it hands out, and fault injection. The power
// loss, snapshots and the test's own changes are in fault_fs_state.cc.
#include "tests/fakes/fault_fs.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"

namespace sn::fs {

namespace {

absl::Status CheckName(std::string_view name) {
  if (!IsComponent(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a single path component: \"", AV(name), "\""));
  }
  return absl::OkStatus();
}

}  // namespace

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultFs* fs, uint64_t ino, uint64_t epoch, std::string name)
      : fs_(fs), ino_(ino), epoch_(epoch), name_(std::move(name)) {}
  ~FaultWritableFile() override {
    if (!closed_) fs_->FileForget(ino_, epoch_);
  }
  absl::Status Append(std::string_view data) override {
    if (closed_) return ErrnoStatus(EBADF, absl::StrCat("write ", name_));
    return fs_->FileAppend(ino_, epoch_, data);
  }
  absl::Status Sync() override {
    if (closed_) return ErrnoStatus(EBADF, absl::StrCat("fsync ", name_));
    return fs_->FileSync(ino_, epoch_);
  }
  absl::Status Close() override {
    if (closed_) return absl::OkStatus();
    closed_ = true;
    return fs_->FileClose(ino_, epoch_);
  }

 private:
  FaultFs* const fs_;
  const uint64_t ino_;
  const uint64_t epoch_;
  const std::string name_;
  bool closed_ = false;
};

class FaultReadableFile final : public ReadableFile {
 public:
  FaultReadableFile(FaultFs* fs, uint64_t ino, uint64_t epoch, FileInfo info)
      : fs_(fs), ino_(ino), epoch_(epoch), info_(info) {}
  ~FaultReadableFile() override { fs_->ReaderForget(ino_, epoch_); }
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    absl::StatusOr<size_t> got = fs_->FileRead(ino_, epoch_, offset_, buf, n);
    if (got.ok()) offset_ += *got;
    return got;
  }
  const FileInfo& info() const override { return info_; }
  int fd() const override { return -1; }

 private:
  FaultFs* const fs_;
  const uint64_t ino_;
  const uint64_t epoch_;
  const FileInfo info_;
  uint64_t offset_ = 0;
};

class FaultFileLock final : public FileLock {
 public:
  FaultFileLock(FaultFs* fs, uint64_t ino, LockMode mode, uint64_t epoch, FileInfo info)
      : fs_(fs), ino_(ino), mode_(mode), epoch_(epoch), info_(info) {}
  ~FaultFileLock() override { fs_->LockRelease(ino_, mode_, epoch_); }
  int fd() const override { return -1; }
  const FileInfo& info() const override { return info_; }

 private:
  FaultFs* const fs_;
  const uint64_t ino_;
  const LockMode mode_;
  const uint64_t epoch_;
  const FileInfo info_;
};

// ---- fault injection -----------------------------------------------------------------------

void FaultFs::FailStep(int64_t step, absl::Status status) {
  absl::MutexLock l(&mu_);
  fail_step_ = step;
  fail_status_ = std::move(status);
}

void FaultFs::FailSyncs(absl::Status status) {
  absl::MutexLock l(&mu_);
  sync_status_ = std::move(status);
}

void FaultFs::SetByteBudget(std::optional<uint64_t> bytes) {
  absl::MutexLock l(&mu_);
  byte_budget_ = bytes;
}

void FaultFs::CrashAtStep(int64_t step) {
  absl::MutexLock l(&mu_);
  crash_step_ = step;
}

void FaultFs::ClearFaults() {
  absl::MutexLock l(&mu_);
  fail_step_ = 0;
  fail_status_ = absl::OkStatus();
  sync_status_ = absl::OkStatus();
  byte_budget_.reset();
  crash_step_ = 0;
}

int64_t FaultFs::steps() const {
  absl::MutexLock l(&mu_);
  return steps_;
}

std::vector<std::string> FaultFs::step_log() const {
  absl::MutexLock l(&mu_);
  return step_log_;
}

bool FaultFs::crashed() const {
  absl::MutexLock l(&mu_);
  return crashed_;
}

int64_t FaultFs::faults_injected() const {
  absl::MutexLock l(&mu_);
  return faults_injected_;
}

uint64_t FaultFs::bytes_appended() const {
  absl::MutexLock l(&mu_);
  return bytes_appended_;
}

absl::Status FaultFs::Alive() const {
  if (crashed_) {
    return absl::AbortedError(absl::StrCat(
        "simulated crash at step ", crash_step_, ": the process is dead until Crash()"));
  }
  return absl::OkStatus();
}

absl::Status FaultFs::Step(std::string what) {
  if (absl::Status s = Alive(); !s.ok()) return s;
  ++steps_;
  if (options_.keep_step_log) step_log_.push_back(absl::StrCat(steps_, " ", what));
  if (steps_ == crash_step_) {
    crashed_ = true;
    return absl::AbortedError(absl::StrCat("simulated crash at step ", steps_, " (", what, ")"));
  }
  if (steps_ == fail_step_) {
    ++faults_injected_;
    return fail_status_;
  }
  return absl::OkStatus();
}

absl::Status FaultFs::SyncFault() {
  if (!sync_status_.ok()) ++faults_injected_;
  return sync_status_;
}

// ---- lookups -------------------------------------------------------------------------------

absl::StatusOr<uint64_t> FaultFs::DirIno(const Dir& dir) const {
  auto it = dir_handles_.find(dir.handle());
  if (!dir.valid() || it == dir_handles_.end()) {
    return ErrnoStatus(EBADF, "directory handle (closed, or from before a crash)");
  }
  return it->second;
}

absl::StatusOr<uint64_t> FaultFs::Lookup(uint64_t dir, std::string_view name) const {
  const Node& d = image_.nodes.at(dir);
  auto it = d.entries.find(std::string(name));
  if (it == d.entries.end()) return ErrnoStatus(ENOENT, std::string(name));
  return it->second;
}

FileInfo FaultFs::InfoOf(uint64_t ino) const {
  const Node& n = image_.nodes.at(ino);
  FileInfo i;
  i.type = n.type;
  i.mode = n.mode & 07777;
  i.uid = n.uid;
  i.gid = n.gid;
  i.nlink = n.nlink;
  i.dev = options_.dev;
  i.ino = ino;
  i.size = n.type == FileType::kDirectory ? 4096 : n.data.size();
  i.birth_ns = n.birth_ns;
  return i;
}

uint64_t FaultFs::NewNode(FileType type, uint32_t mode) {
  // Numbers are freed lazily, when one is needed (or at every gc_every-th creation).
  if (options_.gc_every <= 1 || ++creations_ % options_.gc_every == 0) CollectGarbage();
  uint64_t ino = 0;
  if (image_.free_inos.empty()) {
    ino = image_.next_ino++;
  } else {
    ino = *image_.free_inos.begin();  // the kernel reuses freed inode numbers
    image_.free_inos.erase(image_.free_inos.begin());
  }
  Node& n = image_.nodes[ino];
  n = Node();
  n.type = type;
  n.birth_ns = image_.clock_ns;
  image_.clock_ns += 1'000'000;
  n.mode = mode & 07777;
  n.uid = options_.uid;
  n.gid = options_.gid;
  n.nlink = type == FileType::kDirectory ? 2 : 0;
  return ino;
}

void FaultFs::Apply(DirOp op) {
  // Link counts change by the entries this operation removes and adds (what RecountLinks
  // finds, without walking every node).
  Node& d = image_.nodes.at(op.dir);
  auto links = [this, &d](uint64_t child, int delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Node& c = image_.nodes.at(child);
    uint64_t& n = c.type == FileType::kDirectory ? d.nlink : c.nlink;  // a child dir's ".."
    n += delta;
  };
  for (const std::string& n : op.erase) {
    auto it = d.entries.find(n);
    if (it == d.entries.end()) continue;
    links(it->second, -1);
    d.entries.erase(it);
  }
  for (const auto& [n, ino] : op.set) {
    auto it = d.entries.find(n);
    if (it != d.entries.end()) links(it->second, -1);
    d.entries[n] = ino;
    links(ino, +1);
  }
  image_.pending.push_back(std::move(op));
}

void FaultFs::SyncDirLocked(uint64_t dir) {
  // The durable entries catch up by this directory's pending operations, in order (the same
  // result as copying the volatile entries, without copying a large directory).
  Node& d = image_.nodes.at(dir);
  for (const DirOp& op : image_.pending) {
    if (op.dir != dir) continue;
    for (const std::string& n : op.erase) d.durable_entries.erase(n);
    for (const auto& [n, ino] : op.set) d.durable_entries[n] = ino;
  }
  std::erase_if(image_.pending, [dir](const DirOp& op) { return op.dir == dir; });
}

// ---- Fs ------------------------------------------------------------------------------------

absl::StatusOr<Dir> FaultFs::Root() {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  const int h = next_handle_++;
  dir_handles_[h] = image_.root;
  return Dir(this, h);
}

void FaultFs::CloseDir(int handle) {
  absl::MutexLock l(&mu_);
  dir_handles_.erase(handle);
}

absl::StatusOr<Dir> FaultFs::OpenDirAt(const Dir& parent, std::string_view name) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  absl::StatusOr<uint64_t> p = DirIno(parent);
  if (!p.ok()) return p.status();
  absl::StatusOr<uint64_t> ino = Lookup(*p, name);
  if (!ino.ok()) return ErrnoStatus(ENOENT, absl::StrCat("open directory ", AV(name)));
  if (image_.nodes.at(*ino).type != FileType::kDirectory) {
    return absl::FailedPreconditionError(
        absl::StrCat("\"", AV(name), "\" is not a directory (or is a symlink)"));
  }
  const int h = next_handle_++;
  dir_handles_[h] = *ino;
  return Dir(this, h);
}

absl::Status FaultFs::MakeDirAt(const Dir& parent, std::string_view name, uint32_t mode) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  absl::StatusOr<uint64_t> p = DirIno(parent);
  if (!p.ok()) return p.status();
  if (absl::Status s = Step(absl::StrCat("mkdir ", PathOf(*p), "/", AV(name))); !s.ok()) return s;
  if (Lookup(*p, name).ok()) return ErrnoStatus(EEXIST, absl::StrCat("mkdir ", AV(name)));
  const uint64_t ino = NewNode(FileType::kDirectory, mode & ~options_.umask);
  Apply({*p, {}, {{std::string(name), ino}}});
  return absl::OkStatus();
}

absl::StatusOr<FileInfo> FaultFs::StatAt(const Dir& dir, std::string_view name) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  absl::StatusOr<uint64_t> d = DirIno(dir);
  if (!d.ok()) return d.status();
  absl::StatusOr<uint64_t> ino = Lookup(*d, name);
  if (!ino.ok()) return ErrnoStatus(ENOENT, absl::StrCat("stat ", AV(name)));
  return InfoOf(*ino);
}

absl::StatusOr<FileInfo> FaultFs::StatDir(const Dir& dir) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  absl::StatusOr<uint64_t> d = DirIno(dir);
  if (!d.ok()) return d.status();
  return InfoOf(*d);
}

absl::StatusOr<std::vector<std::string>> FaultFs::ListDir(const Dir& dir) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  absl::StatusOr<uint64_t> d = DirIno(dir);
  if (!d.ok()) return d.status();
  std::vector<std::string> out;
  for (const auto& [n, ino] : image_.nodes.at(*d).entries) out.push_back(n);
  return out;
}

absl::StatusOr<std::string> FaultFs::ReadFileAt(const Dir& dir, std::string_view name,
                                                size_t max_bytes, FileInfo* info) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  absl::StatusOr<uint64_t> d = DirIno(dir);
  if (!d.ok()) return d.status();
  absl::StatusOr<uint64_t> ino = Lookup(*d, name);
  if (!ino.ok()) return ErrnoStatus(ENOENT, absl::StrCat("open ", AV(name)));
  const Node& n = image_.nodes.at(*ino);
  if (n.type == FileType::kSymlink) {
    return absl::FailedPreconditionError(absl::StrCat(AV(name), " is a symlink"));
  }
  if (n.type == FileType::kSocket) return ErrnoStatus(ENXIO, absl::StrCat("open ", AV(name)));
  if (info != nullptr) *info = InfoOf(*ino);
  if (n.type != FileType::kRegular || n.data.size() > max_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(AV(name), ": not a regular file of at most ", max_bytes, " bytes"));
  }
  return n.data;
}

absl::StatusOr<std::unique_ptr<ReadableFile>> FaultFs::OpenReadAt(const Dir& dir,
                                                                   std::string_view name) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  absl::StatusOr<uint64_t> d = DirIno(dir);
  if (!d.ok()) return d.status();
  absl::StatusOr<uint64_t> ino = Lookup(*d, name);
  if (!ino.ok()) return ErrnoStatus(ENOENT, absl::StrCat("open ", AV(name)));
  const Node& n = image_.nodes.at(*ino);
  if (n.type == FileType::kSymlink) {
    return absl::FailedPreconditionError(absl::StrCat(AV(name), " is a symlink"));
  }
  if (n.type == FileType::kSocket) return ErrnoStatus(ENXIO, absl::StrCat("open ", AV(name)));
  if (n.type != FileType::kRegular) {
    return absl::FailedPreconditionError(absl::StrCat(AV(name), " is not a regular file"));
  }
  ++open_readers_[*ino];
  return std::unique_ptr<ReadableFile>(new FaultReadableFile(this, *ino, epoch_, InfoOf(*ino)));
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultFs::CreateExclusiveAt(const Dir& dir,
                                                                         std::string_view name,
                                                                         uint32_t mode) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  absl::StatusOr<uint64_t> d = DirIno(dir);
  if (!d.ok()) return d.status();
  const std::string path = absl::StrCat(PathOf(*d), "/", AV(name));
  if (absl::Status s = Step(absl::StrCat("create ", path)); !s.ok()) return s;
  if (Lookup(*d, name).ok()) return ErrnoStatus(EEXIST, absl::StrCat("create ", AV(name)));
  const uint64_t ino = NewNode(FileType::kRegular, mode);
  Apply({*d, {}, {{std::string(name), ino}}});
  ++open_writers_[ino];
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, ino, epoch_, path));
}

absl::Status FaultFs::RenameAt(const Dir& dir, std::string_view from, std::string_view to,
                               bool no_replace) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (absl::Status s = CheckName(from); !s.ok()) return s;
  if (absl::Status s = CheckName(to); !s.ok()) return s;
  absl::StatusOr<uint64_t> d = DirIno(dir);
  if (!d.ok()) return d.status();
  const std::string what = absl::StrCat("rename ", AV(from), " to ", AV(to));
  if (absl::Status s = Step(absl::StrCat(what, " in ", PathOf(*d),
                                         no_replace ? " (no replace)" : ""));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<uint64_t> src = Lookup(*d, from);
  if (!src.ok()) return ErrnoStatus(ENOENT, what);
  absl::StatusOr<uint64_t> dst = Lookup(*d, to);
  if (dst.ok()) {
    if (no_replace) return ErrnoStatus(EEXIST, what);
    if (*dst == *src) return absl::OkStatus();  // two links of one file: nothing happens
    const Node& s = image_.nodes.at(*src);
    const Node& t = image_.nodes.at(*dst);
    if (s.type == FileType::kDirectory && t.type != FileType::kDirectory) {
      return ErrnoStatus(ENOTDIR, what);
    }
    if (s.type != FileType::kDirectory && t.type == FileType::kDirectory) {
      return ErrnoStatus(EISDIR, what);
    }
    if (t.type == FileType::kDirectory && !t.entries.empty()) return ErrnoStatus(ENOTEMPTY, what);
  }
  Apply({*d, {std::string(from)}, {{std::string(to), *src}}});
  return absl::OkStatus();
}

absl::Status FaultFs::UnlinkAt(const Dir& dir, std::string_view name) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  absl::StatusOr<uint64_t> d = DirIno(dir);
  if (!d.ok()) return d.status();
  if (absl::Status s = Step(absl::StrCat("unlink ", PathOf(*d), "/", AV(name))); !s.ok()) return s;
  absl::StatusOr<uint64_t> ino = Lookup(*d, name);
  if (!ino.ok()) return ErrnoStatus(ENOENT, absl::StrCat("unlink ", AV(name)));
  if (image_.nodes.at(*ino).type == FileType::kDirectory) {
    return ErrnoStatus(EISDIR, absl::StrCat("unlink ", AV(name)));
  }
  Apply({*d, {std::string(name)}, {}});
  return absl::OkStatus();
}

absl::Status FaultFs::SyncDir(const Dir& dir) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  absl::StatusOr<uint64_t> d = DirIno(dir);
  if (!d.ok()) return d.status();
  if (absl::Status s = Step(absl::StrCat("syncdir ", PathOf(*d))); !s.ok()) return s;
  if (absl::Status s = SyncFault(); !s.ok()) return s;
  SyncDirLocked(*d);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FileLock>> FaultFs::LockAt(const Dir& dir, std::string_view name,
                                                           LockMode mode) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  absl::StatusOr<uint64_t> d = DirIno(dir);
  if (!d.ok()) return d.status();
  absl::StatusOr<uint64_t> ino = Lookup(*d, name);
  if (!ino.ok()) return ErrnoStatus(ENOENT, absl::StrCat("open ", AV(name)));
  const Node& n = image_.nodes.at(*ino);
  if (n.type == FileType::kSymlink) {
    return absl::FailedPreconditionError(absl::StrCat(AV(name), " is a symlink"));
  }
  if (n.type == FileType::kSocket) return ErrnoStatus(ENXIO, absl::StrCat("open ", AV(name)));
  if (n.type != FileType::kRegular) {
    return absl::FailedPreconditionError(absl::StrCat(AV(name), " is not a regular file"));
  }
  LockState& ls = locks_[*ino];
  if (ls.exclusive || (mode == LockMode::kExclusive && ls.shared > 0)) {
    return absl::UnavailableError(absl::StrCat(AV(name), " is locked"));
  }
  if (mode == LockMode::kExclusive) {
    ls.exclusive = true;
  } else {
    ++ls.shared;
  }
  return std::unique_ptr<FileLock>(new FaultFileLock(this, *ino, mode, epoch_, InfoOf(*ino)));
}

// ---- files and locks -----------------------------------------------------------------------

absl::Status FaultFs::FileAppend(uint64_t ino, uint64_t epoch, std::string_view data) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (epoch != epoch_) return ErrnoStatus(EBADF, "write (a file from before a crash)");
  if (absl::Status s = Step(absl::StrCat("append ", data.size(), " bytes to inode ", ino));
      !s.ok()) {
    return s;
  }
  Node& n = image_.nodes.at(ino);
  if (byte_budget_.has_value()) {
    // A budget of 0 is a full disk whatever is stored (no walk of every node per write).
    const uint64_t used = *byte_budget_ == 0 ? 0 : BytesUsedLocked();
    const uint64_t room = *byte_budget_ > used ? *byte_budget_ - used : 0;
    if (data.size() > room) {
      n.data.append(data.substr(0, room));  // write() stores what fits, then ENOSPC
      bytes_appended_ += room;
      ++faults_injected_;
      return ErrnoStatus(ENOSPC, absl::StrCat("write inode ", ino));
    }
  }
  n.data.append(data);
  bytes_appended_ += data.size();
  return absl::OkStatus();
}

absl::Status FaultFs::FileSync(uint64_t ino, uint64_t epoch) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (epoch != epoch_) return ErrnoStatus(EBADF, "fsync (a file from before a crash)");
  Node& n = image_.nodes.at(ino);
  absl::Status s = Step(absl::StrCat("sync inode ", ino));
  if (s.ok()) s = SyncFault();
  if (!s.ok()) {
    if (!crashed_) n.sync_failed = true;  // the kernel dropped the dirty pages
    return s;
  }
  if (!n.sync_failed) n.durable_data = n.data;
  return absl::OkStatus();
}

absl::Status FaultFs::FileClose(uint64_t ino, uint64_t epoch) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (epoch != epoch_) return ErrnoStatus(EBADF, "close (a file from before a crash)");
  if (--open_writers_[ino] == 0) open_writers_.erase(ino);
  return absl::OkStatus();
}

void FaultFs::FileForget(uint64_t ino, uint64_t epoch) {
  absl::MutexLock l(&mu_);
  if (epoch != epoch_) return;
  if (--open_writers_[ino] == 0) open_writers_.erase(ino);
}

absl::StatusOr<size_t> FaultFs::FileRead(uint64_t ino, uint64_t epoch, uint64_t offset,
                                         char* buf, size_t n) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = Alive(); !s.ok()) return s;
  if (epoch != epoch_) return ErrnoStatus(EBADF, "read (a file from before a crash)");
  const std::string& data = image_.nodes.at(ino).data;  // open: never collected
  if (offset >= data.size()) return size_t{0};
  const size_t got = std::min<size_t>(n, data.size() - offset);
  data.copy(buf, got, offset);
  return got;
}

void FaultFs::ReaderForget(uint64_t ino, uint64_t epoch) {
  absl::MutexLock l(&mu_);
  if (epoch != epoch_) return;
  if (--open_readers_[ino] == 0) open_readers_.erase(ino);
}

void FaultFs::LockRelease(uint64_t ino, LockMode mode, uint64_t epoch) {
  absl::MutexLock l(&mu_);
  if (epoch != epoch_) return;  // died with its process
  LockState& ls = locks_[ino];
  if (mode == LockMode::kExclusive) {
    ls.exclusive = false;
  } else {
    --ls.shared;
  }
  if (!ls.exclusive && ls.shared == 0) locks_.erase(ino);
}

}  // namespace sn::fs

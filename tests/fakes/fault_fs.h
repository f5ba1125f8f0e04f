// FaultFs: an in-memory implementation of the node's filesystem seam (common/fs/fs.h)
// that can lose what was never made durable, fail fsync, run out of space, and stop at any
// mutating call, so every durable step of privhelper's store and of the agent's files can be
// crashed (after LevelDB's FaultInjectionTestEnv). Test-only.
//
// What it implements, faithfully to PosixFs (tests/common/fs_conformance_test.cc runs the
// same calls against both): directories, regular files, symlinks and sockets (the last two
// made only by the test), modes (MakeDirAt applies the umask, CreateExclusiveAt sets the mode
// exactly), owners (the "process" uid/gid; SetOwner simulates foreign ownership), link counts,
// one device number, exclusive create, RENAME_NOREPLACE, listing, streaming reads (OpenReadAt;
// a ReadableFile reads the file as it is now, like a descriptor, and has no fd), and flock
// between holders: every LockAt is its own open file description, shared locks coexist, an
// exclusive one excludes every other, a conflict is Unavailable at once, and a lock is released
// when its FileLock is destroyed (or the process dies). Nothing follows a symlink. Permission
// checks are not modelled (privhelper runs as root; the agent owns its state). OpenPath
// resolves a '/'-separated path from the root ("" and "/" are the root), following nothing.
//
// Inode numbers are reused as a real kernel reuses them: once nothing can reach a file any
// more (no name, volatile or durable, no pending directory operation, no open file or lock),
// its number is free, and the next file created takes the lowest free number. Birth times
// (FileInfo::birth_ns) come from a simulated clock that advances 1 ms per created file, so a
// recreated file differs from the one before even when it got its inode number. (A real ext4
// stamps birth times from a coarse clock, one value per ~4 ms tick: two files created within
// one tick share it. FaultFs does not model that.)
//
// The durability model. Every file has volatile contents (what reads see) and durable
// contents; every directory has volatile entries and durable entries.
//  - WritableFile::Sync makes the file's durable contents equal its volatile ones. A FAILED
//    Sync loses the unsynced bytes for good, as Linux does after a writeback error: the file
//    keeps showing them, a later Sync returns OK, but they never become durable.
//  - SyncDir makes the directory's durable entries equal its volatile entries: creations,
//    renames and removals in it.
//  - Crash() is a power loss: every directory reverts to its durable entries and every file to
//    its durable contents; whatever is then unreachable from the root is gone. So a file whose
//    creation was never followed by SyncDir vanishes, a synced file in a directory whose own
//    creation was never synced vanishes, an unsynced rename or unlink is undone, and a name
//    made durable before its contents were synced keeps only the contents last synced (the
//    zero-length file of ext4 without auto_da_alloc). CrashOptions widen this to the other
//    outcomes a journaling filesystem allows: a prefix of the not-yet-synced directory
//    operations (in the order they were made) may have reached the disk anyway, and the
//    unsynced tail of each file may be lost, torn (half of it kept) or kept.
//  - KillProcess() is a kill -9: open handles, files and locks die, the data stays.
//  After either, the Fs is usable again (a new process): handles from before fail.
//
// Fault injection counts mutating calls ("steps"): MakeDirAt, CreateExclusiveAt, Append, Sync,
// RenameAt, UnlinkAt and SyncDir, every attempt, successful or not (reads, LockAt and Close
// are not steps). FailStep(n) makes step n fail with a status without doing anything;
// FailSyncs() makes every Sync and SyncDir fail; SetByteBudget() makes Append write what
// fits and then fail with ResourceExhausted (ENOSPC); CrashAtStep(n) makes step n not happen
// and every call after it, reads included, fail with Aborted until Crash() or KillProcess().
//
// Thread-safe. Files, locks and Dirs it hands out must not outlive it.
#ifndef SANDBOX_NODE_TESTS_FAKES_FAULT_FS_H_
#define SANDBOX_NODE_TESTS_FAKES_FAULT_FS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/fs/fs.h"

namespace sn::fs {

class FaultFs final : public Fs {
 public:
  struct Options {
    uint32_t uid = 0;  // the owner of what this "process" creates (privhelper: root)
    uint32_t gid = 0;
    uint32_t umask = 022;
    uint64_t dev = 0xfa17;
    // For long simulations (tests/sim): unreachable files are collected (and their inode
    // numbers freed for reuse) at every `gc_every`-th file creation instead of every one, and
    // the step log is not kept (step_log() is empty). 1 and true: the faithful default.
    uint64_t gc_every = 1;
    bool keep_step_log = true;
  };

  // What happens at a power loss to what was not made durable (see the header comment).
  enum class UnsyncedData { kLost, kTorn, kKept };
  struct CrashOptions {
    size_t persisted_metadata_ops = 0;  // how many pending directory operations reached disk
    UnsyncedData data = UnsyncedData::kLost;
  };

  // The persistent state: every node with its volatile and durable halves, and the directory
  // operations not yet made durable. Copying it copies a filesystem (no handles or locks).
  struct Node {
    FileType type = FileType::kRegular;
    uint32_t mode = 0;
    uint32_t uid = 0;
    uint32_t gid = 0;
    uint64_t nlink = 0;
    int64_t birth_ns = 0;
    std::string data;          // regular file: what reads see; symlink: the target
    std::string durable_data;  // regular file: what survives a power loss
    bool sync_failed = false;  // a Sync failed: the unsynced bytes never become durable
    std::map<std::string, uint64_t> entries;          // directory: name -> inode
    std::map<std::string, uint64_t> durable_entries;  // directory, as of its last SyncDir
  };
  struct DirOp {  // one directory operation: removals, then additions
    uint64_t dir = 0;
    std::vector<std::string> erase;
    std::vector<std::pair<std::string, uint64_t>> set;
  };
  struct Image {
    std::map<uint64_t, Node> nodes;
    uint64_t root = 1;
    uint64_t next_ino = 2;
    std::set<uint64_t> free_inos;  // numbers of freed files, reused lowest first
    int64_t clock_ns = int64_t{1'764'000'000} * 1'000'000'000;  // the next birth time
    std::deque<DirOp> pending;  // not yet durable, oldest first
  };

  FaultFs() : FaultFs(Options()) {}
  explicit FaultFs(Options options);
  // A filesystem holding `image` (e.g. another FaultFs's Snapshot()), with nothing open.
  FaultFs(Options options, Image image);
  ~FaultFs() override;

  Image Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  const Options& options() const { return options_; }

  // Opens the root directory (the state directory of the store under test).
  absl::StatusOr<Dir> Root() ABSL_LOCKS_EXCLUDED(mu_);

  // Fault injection; steps are counted from construction or the last Crash/KillProcess.
  void FailStep(int64_t step, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  void FailSyncs(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);  // OkStatus() stops it
  void SetByteBudget(std::optional<uint64_t> bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void CrashAtStep(int64_t step) ABSL_LOCKS_EXCLUDED(mu_);
  void ClearFaults() ABSL_LOCKS_EXCLUDED(mu_);
  int64_t steps() const ABSL_LOCKS_EXCLUDED(mu_);
  // One line per step so far: "5 rename generations/.1.json.tmp.7 -> 1.json".
  std::vector<std::string> step_log() const ABSL_LOCKS_EXCLUDED(mu_);
  bool crashed() const ABSL_LOCKS_EXCLUDED(mu_);  // the armed crash happened
  // How many calls an injected fault failed (FailStep, FailSyncs, the byte budget).
  int64_t faults_injected() const ABSL_LOCKS_EXCLUDED(mu_);
  // Bytes Append stored since the process started.
  uint64_t bytes_appended() const ABSL_LOCKS_EXCLUDED(mu_);

  // What a power loss now could lose.
  size_t PendingDirOps() const ABSL_LOCKS_EXCLUDED(mu_);
  bool HasUnsyncedData() const ABSL_LOCKS_EXCLUDED(mu_);
  // Bytes of file contents reachable or open (what the byte budget counts).
  uint64_t BytesUsed() const ABSL_LOCKS_EXCLUDED(mu_);

  // A power loss (see above), then a new process: steps restart at 0, faults are cleared,
  // every handle, file and lock from before is dead.
  void Crash(CrashOptions options) ABSL_LOCKS_EXCLUDED(mu_);
  void Crash() ABSL_LOCKS_EXCLUDED(mu_) { Crash(CrashOptions()); }
  // A kill -9 of the process: like Crash but nothing is lost.
  void KillProcess() ABSL_LOCKS_EXCLUDED(mu_);

  // The test's hand on the filesystem (what a local user or an operator does), by '/'-separated
  // path from the root. Each change is durable at once (its directory is synced).
  absl::Status MakeDirs(std::string_view path, uint32_t mode = 0700) ABSL_LOCKS_EXCLUDED(mu_);
  // Creates or replaces `path` (a new inode) with `bytes`.
  absl::Status WriteFile(std::string_view path, std::string_view bytes, uint32_t mode = 0600)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SetOwner(std::string_view path, uint32_t uid, uint32_t gid)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SetMode(std::string_view path, uint32_t mode) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Symlink(std::string_view path, std::string_view target) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Link(std::string_view existing, std::string_view path) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status MakeSocket(std::string_view path) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Remove(std::string_view path) ABSL_LOCKS_EXCLUDED(mu_);
  // Volatile contents of a regular file, and the names in a directory.
  absl::StatusOr<std::string> Contents(std::string_view path) const ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<std::string>> Names(std::string_view path) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The volatile tree, one line per entry, for failure messages.
  std::string Dump() const ABSL_LOCKS_EXCLUDED(mu_);

  // Fs.
  absl::StatusOr<Dir> OpenPath(std::string_view path) override;
  absl::StatusOr<Dir> OpenDirAt(const Dir& parent, std::string_view name) override;
  absl::Status MakeDirAt(const Dir& parent, std::string_view name, uint32_t mode) override;
  absl::StatusOr<FileInfo> StatAt(const Dir& dir, std::string_view name) override;
  absl::StatusOr<FileInfo> StatDir(const Dir& dir) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const Dir& dir) override;
  absl::StatusOr<std::string> ReadFileAt(const Dir& dir, std::string_view name,
                                         size_t max_bytes, FileInfo* info) override;
  absl::StatusOr<std::unique_ptr<ReadableFile>> OpenReadAt(const Dir& dir,
                                                           std::string_view name) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> CreateExclusiveAt(const Dir& dir,
                                                                  std::string_view name,
                                                                  uint32_t mode) override;
  absl::Status RenameAt(const Dir& dir, std::string_view from, std::string_view to,
                        bool no_replace) override;
  absl::Status UnlinkAt(const Dir& dir, std::string_view name) override;
  absl::Status SyncDir(const Dir& dir) override;
  absl::StatusOr<std::unique_ptr<FileLock>> LockAt(const Dir& dir, std::string_view name,
                                                   LockMode mode) override;

 protected:
  void CloseDir(int handle) override;

 private:
  friend class FaultWritableFile;
  friend class FaultReadableFile;
  friend class FaultFileLock;
  struct LockState {
    int shared = 0;
    bool exclusive = false;
  };

  // Called by the files and locks this Fs handed out.
  absl::Status FileAppend(uint64_t ino, uint64_t epoch, std::string_view data)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status FileSync(uint64_t ino, uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status FileClose(uint64_t ino, uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);
  void FileForget(uint64_t ino, uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<size_t> FileRead(uint64_t ino, uint64_t epoch, uint64_t offset, char* buf,
                                  size_t n) ABSL_LOCKS_EXCLUDED(mu_);
  void ReaderForget(uint64_t ino, uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);
  void LockRelease(uint64_t ino, LockMode mode, uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);

  // OK, or why no call may run now (the armed crash happened).
  absl::Status Alive() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a mutating call and applies the injected faults to it.
  absl::Status Step(std::string what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SyncFault() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The directory node behind `dir`, or an error for a closed or pre-crash handle.
  absl::StatusOr<uint64_t> DirIno(const Dir& dir) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> Lookup(uint64_t dir, std::string_view name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies a directory operation to the volatile entries and queues it until SyncDir.
  void Apply(DirOp op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t NewNode(FileType type, uint32_t mode) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SyncDirLocked(uint64_t dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecountLinks() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees every node nothing can reach any more (see the header comment) for reuse.
  void CollectGarbage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NewProcess() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  FileInfo InfoOf(uint64_t ino) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string PathOf(uint64_t dir) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t BytesUsedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The parent directory of a '/'-separated path and its last component.
  absl::StatusOr<std::pair<uint64_t, std::string>> Resolve(std::string_view path) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  Image image_ ABSL_GUARDED_BY(mu_);
  // The running "process".
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 1;
  int next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int, uint64_t> dir_handles_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, int> open_writers_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, int> open_readers_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, LockState> locks_ ABSL_GUARDED_BY(mu_);
  // Faults.
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t creations_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> step_log_ ABSL_GUARDED_BY(mu_);
  int64_t fail_step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_status_ ABSL_GUARDED_BY(mu_);
  absl::Status sync_status_ ABSL_GUARDED_BY(mu_);
  std::optional<uint64_t> byte_budget_ ABSL_GUARDED_BY(mu_);
  int64_t crash_step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t faults_injected_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_appended_ ABSL_GUARDED_BY(mu_) = 0;
  bool crashed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sn::fs

#endif  // SANDBOX_NODE_TESTS_FAKES_FAULT_FS_H_

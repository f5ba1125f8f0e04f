// No `not_found` or `absent` for a sandbox while a create of it may still land
// (docs/protocol.md 22e; docs/reliability.md, finding 6).
//
// privhelper hands a create to its generation's native helper, which sends the native request
// (an Engine API create, a VM supervisor request). When privhelper does not see that exchange
// end — the caller left, the budget ran out, the helper died, or the helper answered
// `uncertain` — the request may still be carried out later: the helper may still be running it,
// and a daemon carries out a request it has received whether or not its client lives. An
// inventory of the sandbox meanwhile is complete and still stale: a `kill` answered `not_found`
// from it leaves the container that then appears, unknown to Core. So a sandbox with a create
// in flight, or one whose end privhelper did not see, is *fenced* until that create can no
// longer act — the end of its budget, the helper's final-outcome grace, and kNativeSettle for a
// daemon to finish a request it received — or until an answer shows the sandbox exists (the
// create landed). While fenced, an answer of absence about it is replaced by `unavailable` (the
// server does that), and a second create of it is refused (REFUSAL_SANDBOX_BUSY). A create
// answered with its exchange's end seen releases its sandbox at once. A generation with a
// fenced create is not collected.
//
// The fence survives privhelper's restarts (kill -9 included): every create in flight has a
// record, an empty file in privhelper's state directory (`fence/`) whose name carries the
// sandbox, the generation, the boot (the kernel's boot_id) and the recorded end
// (CLOCK_MONOTONIC, which is system-wide and runs on across processes). The record is created
// (O_EXCL, so never partial) before the helper gets the call and removed once the sandbox is
// released; the next start fences each recorded sandbox until its recorded end. Records are
// not fsynced, by design: only a process can die with its helper's request in flight while its
// files stay in the page cache; a machine crash ends every in-flight request with its daemon,
// and the records of an earlier boot are dropped at start. docs/formats.md, "the sandbox fence".
//
// Bounds: at most max_entries sandboxes fenced at once (in flight and held); beyond it a
// create is refused `unavailable` (kFull). Thread-safe; one mutex, held across the record's
// create/unlink (one metadata operation each) so that the table and the directory agree.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_SANDBOX_FENCE_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_SANDBOX_FENCE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/fs/fs.h"

namespace sn::privhelper {

class SandboxFence {
 public:
  // How long a daemon may still carry out a native request privhelper did not see answered.
  // An assumption, not a proof (no daemon API bounds it): on this project's 2-core machines
  // at load 40, dockerd finished a create it had received within seconds.
  static constexpr absl::Duration kNativeSettle = absl::Seconds(30);
  static constexpr int64_t kDefaultMaxEntries = 1024;
  static constexpr char kDirName[] = "fence";

  // What Enter answers when it does not admit the call.
  enum class Refused {
    kBusy,          // the sandbox is fenced: REFUSAL_SANDBOX_BUSY
    kFull,          // max_entries sandboxes fenced: REFUSAL_ADMISSION
    kRecordFailed,  // the record could not be created (e.g. ENOSPC): REFUSAL_ADMISSION
  };

  // A create's hold on its sandbox. Destroying it releases the sandbox (the helper answered
  // with the exchange's end seen); HoldUntil keeps it fenced until `until` instead. Movable.
  class Entry {
   public:
    Entry(Entry&& o) noexcept : fence_(o.fence_), sandbox_(std::move(o.sandbox_)) {
      o.fence_ = nullptr;
    }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    Entry& operator=(Entry&&) = delete;
    ~Entry();

    // The create may still land until `until` (monotonic): the sandbox stays fenced, and its
    // record stays, until then (or until the recorded end if that is earlier), unless
    // SawSandbox ends it first.
    void HoldUntil(MonoTime until);

   private:
    friend class SandboxFence;
    Entry(SandboxFence* f, std::string sandbox) : fence_(f), sandbox_(std::move(sandbox)) {}
    SandboxFence* fence_;
    std::string sandbox_;
  };

  // Opens (creating it, 0700) the directory `kDirName` under `state` and loads its records:
  // a record of this boot whose end has not passed fences its sandbox until then; others are
  // removed. A name that is not a record fails the start (FailedPrecondition naming it):
  // privhelper creates nothing else there. `boot_id`: the kernel's (ReadBootId). `clock`
  // (nullptr: SystemClock) must be CLOCK_MONOTONIC-based outside tests; it outlives the fence.
  static absl::StatusOr<std::unique_ptr<SandboxFence>> Open(
      fs::Fs* fs, const fs::Dir& state, std::string boot_id, const Clock* clock = nullptr,
      int64_t max_entries = kDefaultMaxEntries);

  // The kernel's boot id without its dashes (32 lowercase hex digits): from
  // /proc/sys/kernel/random/boot_id, or, where that is hidden (the unit's ProcSubset=pid),
  // from SN_BOOT_ID, which the unit sets to systemd's %b.
  static absl::StatusOr<std::string> ReadBootId();

  // For a create of `sandbox_id` on `generation` whose helper may act until `may_act_until`
  // (monotonic: the call's budget end plus the helper's final-outcome grace): records it and
  // fences the sandbox, or says why not (kBusy: the sandbox is fenced already).
  std::variant<Entry, Refused> Enter(const std::string& sandbox_id, int64_t generation,
                                     MonoTime may_act_until) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether `sandbox_id` is fenced now: an answer of its absence is not proof.
  bool Fenced(const std::string& sandbox_id) ABSL_LOCKS_EXCLUDED(mu_);

  // An answer showed that `sandbox_id` exists: a held create of it has landed, and its fence
  // ends (with its record). A create still in flight keeps its fence until its own answer.
  void SawSandbox(const std::string& sandbox_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether a create of `generation` is fenced now (collection waits).
  bool HoldsGeneration(int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);

  // Sandboxes fenced now (tests, figures).
  int64_t size() ABSL_LOCKS_EXCLUDED(mu_);

  // A record's file name, and its parse (nullopt when `name` is not one). Public for tests.
  struct Record {
    std::string sandbox_id;
    int64_t generation = 0;
    std::string boot_id;
    int64_t end_ns = 0;  // CLOCK_MONOTONIC
  };
  static std::string RecordName(const Record& r);
  static std::optional<Record> ParseRecordName(std::string_view name);

 private:
  struct Held {
    int64_t generation = 0;
    std::string record;                  // the record's file name ("" once removed)
    MonoTime recorded_end;               // the end its record says
    std::optional<MonoTime> held_until;  // set once no Entry holds it: fenced until then
  };
  SandboxFence(fs::Fs* fs, fs::Dir dir, std::string boot_id, const Clock* clock,
               int64_t max_entries);
  // An Entry's own ends. Its sandbox's row stays until then: nothing else removes a row that
  // is not held (SawSandbox and PurgeLocked take held rows only, Enter refuses a fenced one).
  void Release(const std::string& sandbox) ABSL_LOCKS_EXCLUDED(mu_);
  void Hold(const std::string& sandbox, MonoTime until) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops held entries whose end passed, removing their records.
  void PurgeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveRecordLocked(Held* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  fs::Fs* const fs_;
  const fs::Dir dir_;
  const std::string boot_id_;
  const Clock* const clock_;
  const int64_t max_entries_;
  absl::Mutex mu_;
  std::map<std::string, Held> fenced_ ABSL_GUARDED_BY(mu_);  // by sandbox id
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_SANDBOX_FENCE_H_

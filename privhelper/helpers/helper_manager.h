// Native helpers: one process per generation, started on first use with least privilege
// (spawn.h: no capability, no_new_privs, seccomp, clean descriptors and environment,
// rlimits), spoken to over a socketpair (framing.h, proto/native_helper.proto), stopped when
// idle, reaped with waitpid.
//
// Guarantees:
//  - A helper counts as live from spawn until waitpid() returns for it, whatever happened to
//    its callers; live_helpers() never exceeds HelperOptions::max_helpers (retiring helpers
//    included). Collection refuses while live_pids(generation) is not empty.
//  - A helper serves only after it announced HelperReady for its generation with
//    kHelperProtocolVersion and privhelper read, in /proc/<pid>/status, that it runs with
//    no_new_privs, both seccomp filters and no capability in any set; otherwise it is killed
//    and reaped before Execute returns a typed error (HelperFailure).
//  - A helper's VmRequest runs only when vm_permits.h permits it for a call in flight (on that
//    call's thread, through HelperOptions::vm_actions); a helper that breaks the table is
//    killed, and its calls fail as if it had exited.
//  - A helper with no call in flight for HelperOptions::idle_timeout (measured on the injected
//    clock) is retired by ReapIdle(): it leaves the table at once, so a later call starts a new
//    helper and is never written to the retiring one; EOF on its socket lets it finish and
//    exit; it stays counted until reaped.
//
// Threads: Execute from any thread (gRPC handlers); ReapIdle from the reaper thread (when
// HelperOptions::idle_reaper_thread) or a test; one reader thread per helper. The helper's
// socket is read by one thread at a time: a call waiting for its result reads it itself (so
// the result needs no hand-off from another thread), the reader thread only while no call
// waits (late results, EOF).
#ifndef SANDBOX_NODE_PRIVHELPER_HELPERS_HELPER_MANAGER_H_
#define SANDBOX_NODE_PRIVHELPER_HELPERS_HELPER_MANAGER_H_

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "privhelper/helpers/spawn.h"
#include "proto/native_helper.pb.h"
#include "proto/privhelper.pb.h"

namespace sn::privhelper {

// What privhelper resolved for one call from state it owns (its configuration and the
// generation it holds), never from the agent; sent to the helper beside the request.
struct ResolvedCall {
  std::string native_image;  // create: the native image of the request's image name
  int64_t max_active = 0;
  int64_t max_retained = 0;
  // The sandboxes of the other calls holding a capacity slot of this call's kind in flight
  // when privhelper admitted it (privhelper/rpc/slot_reservations.h).
  std::vector<std::string> in_flight_sandbox_ids;
};

// What privhelper does for a helper's permitted VmRequest (HelperOptions::vm_actions).
using VmActions = std::function<absl::Status(
    const v1::ExecuteRequest& request, const ResolvedCall& resolved, const v1::VmRequest& vm)>;

struct HelperOptions {
  std::string helper_path;      // the native_helper executable
  std::string provider = "docker";
  std::string installation_id;  // labels every native object
  // The provider's own flags for its native helper (`--<option>=VALUE`, options its
  // registration in privhelper/native/providers.cc names), from its Backend (backend.h).
  std::vector<std::string> provider_flags;
  absl::Duration start_timeout = absl::Seconds(10);
  // The longest a read may wait inside one frame (the helper writes a frame whole); a helper
  // that stalls mid-frame is killed and its call fails as if the helper had exited.
  absl::Duration frame_read_timeout = absl::Seconds(10);
  int max_helpers = 8;          // live helpers at once (spawned, not yet reaped)
  // privhelper config `helper_idle_seconds` (default 600).
  absl::Duration idle_timeout = absl::Seconds(600);
  const Clock* clock = nullptr;  // for idle time; nullptr = SystemClock
  // Production: a thread calls ReapIdle() every reap_interval of real time (zero: a quarter of
  // idle_timeout, between 1 s and 30 s). Tests driving a SimulatedClock turn it off and call
  // ReapIdle() themselves.
  bool idle_reaper_thread = true;
  absl::Duration reap_interval = absl::ZeroDuration();
  // Opens the generation's lease descriptor, handed to the helper as fd 4 (--lease_fd=4) and
  // closed by privhelper only after the helper was reaped. Unset: no lease (until the rollout
  // issue's generation store provides one).
  std::function<absl::StatusOr<int>(int64_t generation)> open_lease;
  // The executable to run for a generation (a Runtime helper its release provides, verified in
  // privhelper's store). Unset or "": helper_path, the host program's native helper.
  std::function<absl::StatusOr<std::string>(int64_t generation)> helper_path_for;
  SandboxLimits limits;
  // A provider with VMs (the microVM backend) runs here what its helper asks of privhelper
  // (VmRequest, proto/native_helper.proto) once vm_permits.h permitted it, for the call
  // `request` privhelper has in flight and what privhelper resolved for it; the status is the
  // VmAnswer. Called on the call's own Execute thread, never under a lock. Unset: the provider
  // has no VMs, and a helper that sends a VmRequest is killed.
  VmActions vm_actions;
};

// Why no helper took a call; carried as the typed cause of Execute's error status
// (common/error_cause.h: provider_unavailable, or configuration_invalid for the two
// FailedPrecondition ones; the failure's name as detail).
enum class HelperFailure {
  kStopping,           // Unavailable: privhelper is shutting down
  kTooManyHelpers,     // Unavailable: max_helpers live (retiring ones included)
  kStartFailed,        // Unavailable: spawn, lease, or no HelperReady in time
  kProtocolMismatch,   // FailedPrecondition: the helper speaks another protocol version
                       //   (a configuration problem: configuration_invalid)
  kNotSandboxed,       // FailedPrecondition: /proc shows privileges or no seccomp filters
  kUnreachable,        // Unavailable: the call could not be written to the helper
};
std::optional<HelperFailure> GetHelperFailure(const absl::Status& s);

class HelperManager {
 public:
  // How long, after signalling a call whose budget expired, Execute waits for its final outcome.
  static constexpr absl::Duration kFinalOutcomeGrace = absl::Seconds(3);


  // Starts the reaper thread when options.idle_reaper_thread. The seccomp program is built on
  // the first spawn (before its fork); should libseccomp fail, every start fails kStartFailed.
  explicit HelperManager(HelperOptions options);
  // Stops the reaper, closes every helper's socket (helpers finish their calls and exit) and
  // waits for all of them (waitpid).
  ~HelperManager();

  // Runs `req` on its generation's helper (started when needed) and returns the helper's
  // answer. The budget (req.budget_ms) is anchored to this process's clock on entry.
  // `cancelled` is polled; on cancellation the helper is told to cancel and Cancelled is
  // returned at once (nobody waits for the answer). At budget expiry the helper is told to
  // cancel and, for up to kFinalOutcomeGrace, its final outcome is awaited and returned (so
  // the caller can record what really happened); DeadlineExceeded when it does not come.
  // Aborted when the helper died with the call in flight. Other errors carry a HelperFailure.
  // REQUIRES: req.generation() > 0.
  absl::StatusOr<v1::ExecuteResponse> Execute(const v1::ExecuteRequest& req,
                                              const ResolvedCall& resolved,
                                              const std::function<bool()>& cancelled)
      ABSL_LOCKS_EXCLUDED(mu_, spawn_mu_);

  // Retires every helper without a call in flight whose last call ended (or which started)
  // more than idle_timeout ago; returns how many.
  int ReapIdle() ABSL_LOCKS_EXCLUDED(mu_);

  // Helpers whose waitpid has not returned yet.
  int live_helpers() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until live_helpers() is 0 or `timeout` passes; true when it reached 0.
  bool WaitUntilNoLiveHelpers(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);
  // The generation's helpers (serving and retiring) whose waitpid has not returned.
  std::vector<pid_t> live_pids(int64_t generation) const ABSL_LOCKS_EXCLUDED(mu_);
  // live_pids' sizes for every generation that has any, in generation order (one lock).
  std::map<int64_t, int64_t> live_by_generation() const ABSL_LOCKS_EXCLUDED(mu_);
  // Retires the generation's serving helper now if no call holds it (collection asked for the
  // generation); it stays live until reaped. True when one was retired.
  bool RetireIfIdle(int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  // pid of the generation's serving helper (not a retiring one), or 0.
  pid_t helper_pid(int64_t generation) const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until `n` calls are in flight on the generation's serving helper or `timeout`
  // passes (tests); true when reached.
  bool WaitForCallsInFlight(int64_t generation, int n, absl::Duration timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Helper;
  struct Entry {
    std::shared_ptr<Helper> helper;
    int calls = 0;        // Execute calls holding the helper
    MonoTime last_used;   // when the last call ended, or the helper started
  };
  class CallLease;

  absl::StatusOr<std::shared_ptr<Helper>> Acquire(int64_t generation)
      ABSL_LOCKS_EXCLUDED(mu_, spawn_mu_);
  void Release(const std::shared_ptr<Helper>& h) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::shared_ptr<Helper>> Spawn(int64_t generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(spawn_mu_);
  // Spawn's steps. The executable a helper of `generation` runs and the generation's lease
  // descriptor (-1 without one; the caller owns it).
  absl::Status ResolveLaunch(int64_t generation, std::string* path, int* lease_fd)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(spawn_mu_);
  // Forks the sandboxed helper on a new socket pair, counted live; on failure `lease_fd` is
  // closed and nothing is left.
  absl::StatusOr<std::shared_ptr<Helper>> Launch(int64_t generation, const std::string& path,
                                                 int lease_fd)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(spawn_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // The helper's HelperReady within start_timeout, for this generation, provider and protocol,
  // with both seccomp filters loaded; otherwise it is killed and reaped (and its lease closed).
  absl::Status AwaitReady(const Helper& h, int lease_fd) ABSL_LOCKS_EXCLUDED(mu_);
  // SIGKILLs and reaps a helper that never served; returns its wait status.
  int KillAndReap(pid_t pid, int lease_fd) ABSL_LOCKS_EXCLUDED(mu_);
  void ReaderLoop(std::shared_ptr<Helper> h) ABSL_LOCKS_EXCLUDED(mu_);
  void ReaperLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetPid(pid_t pid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  MonoTime Now() const { return clock_->Monotonic(); }

  const HelperOptions options_;
  const Clock* const clock_;
  absl::Mutex spawn_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // kSpawn, exported once (before the first fork) and reused for every helper.
  std::vector<sock_filter> spawn_filter_ ABSL_GUARDED_BY(spawn_mu_);
  mutable absl::Mutex mu_;
  std::map<int64_t, Entry> helpers_ ABSL_GUARDED_BY(mu_);  // serving helpers only
  // Every helper whose reader thread has not finished (serving and retiring): the destructor
  // joins their readers.
  std::vector<std::shared_ptr<Helper>> running_ ABSL_GUARDED_BY(mu_);
  int live_ ABSL_GUARDED_BY(mu_) = 0;
  std::multimap<int64_t, pid_t> live_pids_ ABSL_GUARDED_BY(mu_);  // generation -> pid
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_HELPERS_HELPER_MANAGER_H_

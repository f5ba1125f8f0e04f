// One native helper as privhelper's HelperManager holds it (helper_manager.h): its process,
// its socket, the calls waiting on it, and the reading of that socket — results handed to
// their calls, VmRequests checked against the permit table (vm_permits.h) and handed to their
// calls' threads. Internal to helper_manager.cc and helper_channel.cc.
#ifndef SANDBOX_NODE_PRIVHELPER_HELPERS_HELPER_CHANNEL_H_
#define SANDBOX_NODE_PRIVHELPER_HELPERS_HELPER_CHANNEL_H_

#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/helpers/vm_permits.h"
#include "proto/native_helper.pb.h"

namespace sn::privhelper {

// Reading the helper's socket: one thread at a time, the one holding `reading`. A call waiting
// for its result reads itself (and hands other calls' results to their slots), so its result
// needs no wake-up of another thread. The reader thread sleeps in poll() for the socket's
// hang-up only (events 0: POLLHUP and POLLERR, never POLLIN), so neither a result nor a call
// that starts waiting wakes it; when the helper exits it reads what is left to EOF. A late
// result (its caller gave up) waits in the socket until the next call reads it, or until the
// helper exits: the kernel's socket buffer bounds it, and the helper never waits on it for
// anything but its own write.
struct HelperManager::Helper {
  ~Helper() {
    if (fd >= 0) close(fd);
  }
  int64_t generation = 0;
  pid_t pid = 0;
  int fd = -1;
  int lease_fd = -1;  // closed after waitpid
  absl::Mutex write_mu;
  absl::Mutex mu;
  bool dead ABSL_GUARDED_BY(mu) = false;  // EOF or a failed read: no more results
  // A failed read other than EOF at a frame boundary (a broken or stalled frame): the helper
  // may still run, so it is killed before the reap (never waited for).
  bool broken ABSL_GUARDED_BY(mu) = false;
  bool reading ABSL_GUARDED_BY(mu) = false;
  uint64_t next_call ABSL_GUARDED_BY(mu) = 1;
  bool has_vm_actions = false;  // HelperOptions::vm_actions is set
  struct Slot {
    bool done = false;
    v1::ExecuteResponse response;
    const v1::ExecuteRequest* request = nullptr;  // Execute's own, alive while pending
    VmPermitState vm_permits;
    std::optional<v1::VmRequest> vm;  // permitted, for the call's thread to run
  };
  std::map<uint64_t, std::shared_ptr<Slot>> pending ABSL_GUARDED_BY(mu);
  std::thread reader;

  // Hands a result to its slot, or logs it when its caller gave up; a VmRequest goes to
  // DeliverVm.
  void Deliver(v1::HelperToParent* msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Checks a VmRequest against vm_permits.h and hands a permitted one to its call's slot; a
  // breach kills the helper; a request for a call no longer in flight is answered at once.
  void DeliverVm(v1::VmRequest* vm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Marks the helper dead and broken and SIGKILLs it (it broke the framing or a permit).
  void KillBroken(std::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Writes a VmAnswer (taking write_mu).
  void Answer(uint64_t call_id, const absl::Status& s);
  // Runs the VmRequest waiting in `slot` through `actions` (or, when `actions` is null, answers
  // that the call's budget ended without acting) and answers it. REQUIRES mu held and
  // slot->vm set; mu is released while the action runs.
  void ServeVm(Slot* slot, const ResolvedCall& resolved,
               const VmActions* actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // REQUIRES: mu held, `reading` not. Takes `reading`, reads one message without mu, delivers
  // it under mu; EOF or a broken frame marks the helper dead. Returns with mu held.
  void ReadOne() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Returns when `slot` is done, the helper is dead or `until` passed; reads the socket itself
  // whenever nobody else does.
  void AwaitOrRead(const Slot& slot, absl::Time until) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_HELPERS_HELPER_CHANNEL_H_

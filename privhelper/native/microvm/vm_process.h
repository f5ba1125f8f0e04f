// A running microVM as the store knows it: the per-VM supervisor's record (written by the
// supervisor once qemu runs) and the check that finds the VM again after any restart of the
// node's processes — through a pidfd of the recorded supervisor whose start time (/proc/<pid>/
// stat, field 22) is the recorded one, never through a bare pid, which the kernel may have
// given to another process since.
//
// Record (VM directory, `supervisor.json`, written with write-temp, fsync, rename, fsync dir):
//   {"schema":1,"supervisor_pid":P,"supervisor_start":T,"qemu_pid":Q,"qemu_start":U}
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_VM_PROCESS_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_VM_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace sn::microvm {

inline constexpr char kSupervisorRecord[] = "supervisor.json";

struct SupervisorRecord {
  pid_t supervisor_pid = 0;
  uint64_t supervisor_start = 0;  // clock ticks after boot
  pid_t qemu_pid = 0;
  uint64_t qemu_start = 0;
};

std::string EncodeSupervisorRecord(const SupervisorRecord& r);
// Strict: every member present, no other, positive pids. DataLoss otherwise.
absl::StatusOr<SupervisorRecord> DecodeSupervisorRecord(std::string_view text);

// The start time of `pid` (clock ticks after boot), NotFound when it does not exist.
absl::StatusOr<uint64_t> ProcessStartTime(pid_t pid);

// An open pidfd of a live supervisor (closed on destruction).
class LiveVm {
 public:
  LiveVm(int pidfd, SupervisorRecord record) : pidfd_(pidfd), record_(record) {}
  LiveVm(LiveVm&& o) noexcept : pidfd_(o.pidfd_), record_(o.record_) { o.pidfd_ = -1; }
  LiveVm& operator=(LiveVm&&) = delete;
  ~LiveVm();
  int pidfd() const { return pidfd_; }
  const SupervisorRecord& record() const { return record_; }

 private:
  int pidfd_;
  SupervisorRecord record_;
};

// The VM of `vm_dir` if its supervisor runs: nothing when there is no record, or when the
// recorded supervisor is gone or its pid now belongs to another process (the VM is stopped:
// `retained`). Unavailable when the record cannot be read or is malformed, or /proc cannot be
// read: the answer is unknown, and the caller keeps every byte.
// `why_not` (optional) receives, when no live VM is found, which check said so.
absl::StatusOr<std::optional<LiveVm>> FindLiveVm(const std::string& vm_dir,
                                                 std::string* why_not = nullptr);

}  // namespace sn::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_VM_PROCESS_H_

// A microVM's CPU quota: each qemu runs in a cgroup of its own whose CPU
// bandwidth is exactly the create's `cpu_millis` (issue 25, "Sandbox state";
// docs/protocol.md 24n).
//
// Where: the host's CPU controller hierarchy, in a subtree of the node's own
// beside the service manager's (as dockerd's cgroupfs driver keeps
// /sys/fs/cgroup/<controller>/docker):
//   cgroup v1   <the hierarchy mounted with the "cpu"
//   controller>/sandbox-node-vms/<leaf>
//               cpu.cfs_period_us, cpu.cfs_quota_us
//   cgroup v2   <the unified hierarchy, with "cpu" in its
//   cgroup.controllers>/sandbox-node-vms/
//               <leaf>; "+cpu" in sandbox-node-vms/cgroup.subtree_control;
//               cpu.max
// The leaf is the sandbox's id (the usability probe's VM: "probe-<privhelper's
// pid>").
//
// Who: privhelper finds the hierarchy and makes sandbox-node-vms at start
// (FindCpuHierarchy, MakeVmCgroupParent); the VM's supervisor (root) makes the
// leaf and writes the quota (PrepareVmCgroup), and qemu's process moves itself
// into it before it drops to the VM's uid (EnterCgroup), so only qemu, never
// the supervisor, is charged; when qemu has been reaped the supervisor removes
// the leaf (RemoveVmCgroup). A supervisor killed before that leaves an empty
// leaf: the VM's next boot uses it again, and the VM's removal removes it.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_VM_CGROUP_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_VM_CGROUP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sn::microvm {

inline constexpr char kVmCgroupParent[] = "sandbox-node-vms";

struct CpuHierarchy {
  std::string
      mount; // absolute mount point of the hierarchy holding the cpu controller
  int version = 0; // 1 or 2
};

// The CPU controller's hierarchy from /proc/self/mountinfo's text: a cgroup
// (v1) mount whose super options name the "cpu" controller, else the cgroup2
// mount when `v2_controllers(mount)` (the text of its cgroup.controllers) lists
// "cpu". NotFound with the reason when neither exists (a cgroup v2 host whose
// root does not delegate "cpu", a system without cgroups).
absl::StatusOr<CpuHierarchy> FindCpuHierarchy(
    std::string_view mountinfo,
    const std::function<std::string(const std::string &)> &v2_controllers);
// The same, from this process's /proc/self/mountinfo and the kernel's files.
absl::StatusOr<CpuHierarchy> FindCpuHierarchy();

// <mount>/sandbox-node-vms, made (0755) if missing; with v2, "cpu" enabled for
// its children.
absl::StatusOr<std::string> MakeVmCgroupParent(const CpuHierarchy &h);

// The CPU bandwidth of exactly `cpu_millis` thousandths of a CPU: period 100 ms
// and quota cpu_millis × 100 µs, or, below 10 millis (the kernel's smallest
// quota is 1 ms), period 1 s and quota cpu_millis × 1 ms.
struct CpuBandwidth {
  int64_t quota_us = 0;
  int64_t period_us = 0;
};
absl::StatusOr<CpuBandwidth> BandwidthFor(int64_t cpu_millis);

// The supervisor's steps. `leaf` is an absolute path whose parent is a
// directory of a cgroup filesystem (checked: statfs); the leaf's version
// follows that filesystem. Makes the leaf (an existing one, a killed
// supervisor's, is used again) and writes the quota.
absl::Status PrepareVmCgroup(const std::string &leaf, int64_t cpu_millis);
// In qemu's process after fork (async-signal-safe: open, write, close): moves
// the calling process into `procs` (the leaf's cgroup.procs path, made before
// the fork). An errno, 0 on success.
int EnterCgroup(const char *procs);
// Removes the leaf once no process is in it (a just-reaped process may take a
// moment to leave it: EBUSY is retried for up to a second). A leaf that is not
// there is OK.
absl::Status RemoveVmCgroup(const std::string &leaf);

} // namespace sn::microvm

#endif // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_VM_CGROUP_H_

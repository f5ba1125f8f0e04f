// qemu's seccomp policy: the release's artifact of kind `seccomp` (docs/formats.md, "qemu's
// seccomp policy"), an allow-list of x86-64 system calls by name:
//
//   {"format": "sandbox-node-qemu-seccomp/1", "allow": ["accept4", "access", ...]}
//
// Strict: at most kMaxQemuSeccompBytes of one JSON object with exactly these two members
// (common/json/record.h: no unknown or duplicated member, every entry a string), at most
// kMaxQemuSeccompCalls names, each once, each a system call of x86-64 as libseccomp names it;
// one name it does not know refuses the whole policy. Every call the policy does not allow
// kills qemu (SCMP_ACT_KILL_PROCESS: SIGSYS), and so does any other ABI.
//
// The VM supervisor loads the policy in qemu's process as the last step before its execve
// (after the uid drop and no_new_privs), so the policy governs from that execve on: the
// dynamic loader, qemu's start-up, and qemu's own `-sandbox` filter stacked on it (a call
// runs only if every filter allows it). A policy that does not allow execve is refused: it
// would kill the process at its exec.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_QEMU_SECCOMP_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_QEMU_SECCOMP_H_

#include <linux/filter.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sn::microvm {

inline constexpr std::string_view kQemuSeccompFormat = "sandbox-node-qemu-seccomp/1";
inline constexpr size_t kMaxQemuSeccompBytes = 64 * 1024;
inline constexpr size_t kMaxQemuSeccompCalls = 512;

// The allowed system calls (x86-64 numbers), in the policy's order.
struct QemuSeccompPolicy {
  std::vector<int> allowed;
};

// InvalidArgument naming the rule broken (and the member or entry, never echoing the input).
absl::StatusOr<QemuSeccompPolicy> ParseQemuSeccompPolicy(std::string_view text);

// The policy as the BPF program seccomp(2) loads (privhelper/native/seccomp_bpf.h).
absl::StatusOr<std::vector<sock_filter>> CompileQemuSeccompPolicy(const QemuSeccompPolicy& p);

// Reads the policy file at `path` (a regular file of at most kMaxQemuSeccompBytes), parses
// and compiles it. What the supervisor runs before it forks qemu and privhelper runs on the
// staged copy before it starts anything. The message names the path and the rule broken.
absl::StatusOr<std::vector<sock_filter>> ReadQemuSeccompPolicy(const std::string& path);

}  // namespace sn::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_QEMU_SECCOMP_H_

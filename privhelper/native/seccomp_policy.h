// The native helper's system-call policy: two stacked seccomp filters (docs/security.md,
// "Native helpers: privileges, descriptors, seccomp", lists every group and why it is there).
//
//  - HelperFilter::kSpawn is built by privhelper before it forks a helper (libseccomp
//    allocates, which a forked child of a threaded process must not), exported as a BPF
//    program, and loaded by the child as its last step before execve. It holds for the
//    helper's whole life: the dynamic loader, start-up and serving.
//  - HelperFilter::kServing is built and loaded by the helper itself after start-up and
//    before it reads its first frame. A system call runs only if every loaded filter allows
//    it, so kServing can only narrow kSpawn: it removes execve, fork (clone without
//    CLONE_THREAD), file opening, new executable memory and the seccomp call itself.
//
// Both filters: the syscalls listed are allowed (some only with the argument conditions
// stated); clone3 fails with ENOSYS (its flags sit in memory a filter cannot read; glibc then
// falls back to clone, whose flags it can); the syscalls of KillListed() kill the whole
// process with SIGSYS (no correct helper ever makes them: filesystem mutation, ptrace, bpf,
// keys, mounts, namespaces, io_uring, modules, clocks, reboot); every other call fails with
// EPERM. Only the native architecture (x86-64) is allowed; another ABI kills the process.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_SECCOMP_POLICY_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_SECCOMP_POLICY_H_

#include <linux/filter.h>
#include <sys/types.h>

#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sn::native {

enum class HelperFilter {
  kSpawn,    // loaded by the spawned child before execve (privhelper/helpers/spawn.h)
  kServing,  // loaded by the helper before its first frame (InstallServingFilter)
};

// The filter as a classic BPF program, ready for seccomp(SECCOMP_SET_MODE_FILTER). `self` is
// the pid the kServing filter lets tgkill signal (the helper itself; abort() uses it); it is
// ignored for kSpawn. Called by privhelper (kSpawn) once per HelperManager.
// `provider` adds that provider's own group (AllowProvider in seccomp_policy.cc; docs/security.md
// lists it): "microvm" reads its store read-only (openat without write flags, getdents64,
// lseek), finds and signals a VM's supervisor by pidfd (pidfd_open, pidfd_send_signal) and,
// at start-up only, confines its file access with Landlock (landlock_*). Other providers: none.
absl::StatusOr<std::vector<sock_filter>> ExportHelperFilter(HelperFilter which,
                                                            std::string_view provider,
                                                            pid_t self = 0);

// Builds kServing for this process and loads it on every thread (TSYNC). REQUIRES:
// no_new_privs is set (the spawn path sets it). Called once by the helper's main.
absl::Status InstallServingFilter(std::string_view provider);

// The syscalls that kill the process under both filters (for docs and tests).
std::span<const int> KillListed();

}  // namespace sn::native

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_SECCOMP_POLICY_H_

// The qemu command line of one microVM sandbox, from what the sandbox was created with and
// the generation's pinned files (pure: no I/O). Every byte the guest runs is named here
// explicitly — kernel, firmware (-bios: never qemu's own default), the guest agent's
// initramfs, the root disk overlay — and nothing else reaches the guest: no network device, no
// monitor, no default devices, no host file systems. The serial console is qemu's standard
// output, which the per-VM supervisor writes to a bounded log.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_QEMU_COMMAND_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_QEMU_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sn::microvm {

// The kernel's working minimum of guest RAM (docs/protocol.md, "microVM memory"): a sandbox
// created with less (the spec's floor is 16 MiB) gets this much.
inline constexpr int64_t kMinGuestMemoryMiB = 64;
// TCG's translated-code cache (MiB): the default (1 GiB of address space, a large share of it
// touched) dominates an idle guest's resident memory. Measured with microvm_bench
// (docs/performance.md): 16 MiB left an idle 64 MiB guest at 112 MiB resident; 8 MiB made an
// exec 2.7x slower (the cache thrashes on the guest's fork and exec); 12 MiB holds 108 MiB
// with execs as fast as with 16.
inline constexpr int kTcgCodeBufferMiB = 12;

struct VmFiles {
  std::string kernel;     // the release's `kernel` artifact (an ELF vmlinux with a PVH note)
  std::string firmware;   // the release's `firmware` artifact (-bios)
  std::string initramfs;  // the release's `guest_agent` artifact
  std::string disk;       // the sandbox's qcow2 overlay over the image's read-only base
};

// The guest channel's listening socket, bound by the supervisor (root) in the VM's root-owned
// directory and handed to qemu as this descriptor: qemu neither creates nor can replace it.
inline constexpr int kAgentSocketFd = 3;

struct VmShape {
  std::string accel;       // "kvm" or "tcg" (the probe's choice, never "auto")
  int64_t cpu_millis = 0;  // create's cpu_millis, 1..256000
  int64_t memory_bytes = 0;
  int host_cpus = 1;
};

// qemu's block I/O worker threads (`-object main-loop,thread-pool-max=`) and the root disk's
// virtqueue size (`queue-size=`, each request in flight a coroutine with a 1 MiB stack). Both
// bound what qemu's data can grow by under a guest's I/O: unbounded (64 workers of 8 MiB of
// stack, 256 requests), a VM booting under load passed the limit below now and then and
// qemu aborted ("failed to allocate memory for stack"; docs/security.md, RLIMIT_DATA).
inline constexpr int kQemuIoThreads = 4;
inline constexpr int kRootQueueSize = 64;

// qemu's RLIMIT_DATA (the supervisor's --data-limit): the guest's RAM, plus 256 MiB for qemu
// itself (translation buffer, heap, devices, its fixed threads; a paused 64 MiB microvm holds
// about 111 MiB of data in all, a booting one up to ~300 MiB), 16 MiB per vCPU (its thread's
// stack and buffers), and what its I/O may add: kQemuIoThreads stacks of 8 MiB and
// kRootQueueSize coroutine stacks of 1 MiB.
int64_t QemuDataLimitBytes(const VmShape& shape);

// ⌈cpu_millis / 1000⌉ vCPUs, at least 1 and at most the host's CPUs.
int Vcpus(int64_t cpu_millis, int host_cpus);
// memory_bytes in MiB, rounded up, raised to kMinGuestMemoryMiB.
int64_t GuestMemoryMiB(int64_t memory_bytes);

// The guest kernel's command line for an accelerator ("kvm" or "tcg"). Under TCG it adds
// `noapictimer`: there the kernel's check of the local APIC timer against the PIT fails ("APIC
// timer disabled due to verification failure") after 0.3-0.4 s of guest time before the first
// CPU comes up; with `noapictimer` the kernel skips the check and uses the broadcast timer it
// fell back to anyway (tools/microvm/kernel/README.md; docs/performance.md: create-to-running
// 0.76-0.84 s with it, 0.96-1.02 s without). Under KVM the command line keeps the APIC timer.
std::string KernelCommandLine(const std::string& accel);

// The argv (argv[0] = `qemu`). InvalidArgument for an unknown accelerator, a shape out of
// range or a path that is not absolute or holds a ',' (qemu's option separator).
absl::StatusOr<std::vector<std::string>> QemuArgv(const std::string& qemu, const VmFiles& files,
                                                  const VmShape& shape);

}  // namespace sn::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_QEMU_COMMAND_H_

#include "privhelper/native/microvm/qemu_command.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sn::microvm {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

absl::Status CheckPath(const char* what, const std::string& p) {
  if (p.empty() || p[0] != '/' || p.find(',') != std::string::npos ||
      p.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the VM's ", what, " path must be absolute and hold no ',': ", p));
  }
  return absl::OkStatus();
}

}  // namespace

std::string KernelCommandLine(const std::string& accel) {
  std::string line = "console=ttyS0 quiet reboot=t panic=-1 sn.root=/dev/vda";
  if (accel == "tcg") line += " noapictimer";
  return line;
}

int Vcpus(int64_t cpu_millis, int host_cpus) {
  const int64_t wanted = (std::max<int64_t>(cpu_millis, 1) + 999) / 1000;
  return static_cast<int>(std::clamp<int64_t>(wanted, 1, std::max(host_cpus, 1)));
}

int64_t GuestMemoryMiB(int64_t memory_bytes) {
  return std::max<int64_t>((std::max<int64_t>(memory_bytes, 0) + kMiB - 1) / kMiB,
                           kMinGuestMemoryMiB);
}

int64_t QemuDataLimitBytes(const VmShape& shape) {
  return (GuestMemoryMiB(shape.memory_bytes) + 256 +
          16 * static_cast<int64_t>(Vcpus(shape.cpu_millis, shape.host_cpus)) +
          8 * kQemuIoThreads + kRootQueueSize)
         << 20;
}

absl::StatusOr<std::vector<std::string>> QemuArgv(const std::string& qemu, const VmFiles& f,
                                                  const VmShape& shape) {
  if (shape.accel != "kvm" && shape.accel != "tcg") {
    return absl::InvalidArgumentError(absl::StrCat("unknown accelerator: ", shape.accel));
  }
  if (shape.cpu_millis <= 0 || shape.memory_bytes <= 0) {
    return absl::InvalidArgumentError("cpu_millis and memory_bytes must be positive");
  }
  for (const auto& [what, path] :
       {std::pair{"qemu", &qemu}, {"kernel", &f.kernel}, {"firmware", &f.firmware},
        {"initramfs", &f.initramfs}, {"disk", &f.disk}}) {
    if (absl::Status s = CheckPath(what, *path); !s.ok()) return s;
  }
  std::vector<std::string> argv = {
      qemu,
      // acpi=off: the guest kernel has no ACPI, and only without it does qemu put the
      // virtio-mmio devices on the kernel command line (with it the guest sees no device).
      "-M", "microvm,x-option-roms=off,acpi=off",
      "-accel", shape.accel == "tcg" ? absl::StrCat("tcg,tb-size=", kTcgCodeBufferMiB) : "kvm",
      "-cpu", shape.accel == "kvm" ? "host" : "max",
      "-smp", absl::StrCat(Vcpus(shape.cpu_millis, shape.host_cpus)),
      "-m", absl::StrCat(GuestMemoryMiB(shape.memory_bytes)),
      // Nothing the command line does not name: no default devices, no user config, no
      // network, no monitor, no display, no reboot (a guest reboot ends qemu).
      "-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-nic", "none",
      "-monitor", "none",
      // At most kQemuIoThreads block I/O workers (the data limit counts their stacks).
      "-object", absl::StrCat("main-loop,id=main-loop,thread-pool-max=", kQemuIoThreads),
      // qemu's own seccomp filter (the release's policy is applied around it by the
      // supervisor): no obsolete calls, no privilege changes, no exec, no resource control.
      "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
      "-bios", f.firmware,
      "-kernel", f.kernel,
      "-initrd", f.initramfs,
      "-append", KernelCommandLine(shape.accel),
      "-serial", "stdio",
      "-drive", absl::StrCat("id=root,file=", f.disk, ",format=qcow2,if=none,discard=unmap"),
      "-device", absl::StrCat("virtio-blk-device,drive=root,queue-size=", kRootQueueSize),
      "-device", "virtio-rng-device",
      "-device", "virtio-serial-device",
      "-chardev", absl::StrCat("socket,id=agent,fd=", kAgentSocketFd, ",server=on,wait=off"),
      "-device", "virtserialport,chardev=agent,name=sn.agent",
  };
  return argv;
}

}  // namespace sn::microvm

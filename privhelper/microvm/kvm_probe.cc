#include "privhelper/microvm/kvm_probe.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>

#include "absl/strings/str_cat.h"

namespace sn::microvm {
namespace {

// The child's exit codes.
enum ProbeExit : int {
  kHalted = 0,        // the loop ran to its HLT
  kNoDevice = 10,     // /dev/kvm does not open
  kNoVm = 11,         // the API version is not 12, or KVM_CREATE_VM/VCPU fails
  kSetupFailed = 12,  // memory or registers could not be set
  kOtherExit = 13,    // the vCPU stopped for another reason than HLT
};

// 16-bit real mode at guest physical address 0:
//   mov ecx, 0x200000 ; l: dec ecx ; jnz l ; hlt
constexpr unsigned char kLoop[] = {0x66, 0xB9, 0x00, 0x00, 0x20, 0x00,  // mov ecx, imm32
                                   0x66, 0x49,                          // dec ecx
                                   0x75, 0xFC,                          // jnz -4
                                   0xF4};                               // hlt

[[noreturn]] void RunLoop(const std::string& device) {
  int kvm = open(device.c_str(), O_RDWR | O_CLOEXEC);
  if (kvm < 0) _exit(kNoDevice);
  if (ioctl(kvm, KVM_GET_API_VERSION, 0) != 12) _exit(kNoVm);
  int vm = ioctl(kvm, KVM_CREATE_VM, 0);
  if (vm < 0) _exit(kNoVm);
  void* mem = mmap(nullptr, 0x1000, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) _exit(kSetupFailed);
  std::memcpy(mem, kLoop, sizeof(kLoop));
  kvm_userspace_memory_region region{};
  region.memory_size = 0x1000;
  region.userspace_addr = reinterpret_cast<uint64_t>(mem);
  if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0) _exit(kSetupFailed);
  int vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
  if (vcpu < 0) _exit(kNoVm);
  const int run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
  if (run_size <= 0) _exit(kSetupFailed);
  auto* run = static_cast<kvm_run*>(
      mmap(nullptr, static_cast<size_t>(run_size), PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0));
  if (run == MAP_FAILED) _exit(kSetupFailed);
  kvm_sregs sregs;
  if (ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0) _exit(kSetupFailed);
  sregs.cs.base = 0;
  sregs.cs.selector = 0;
  if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0) _exit(kSetupFailed);
  kvm_regs regs{};
  regs.rip = 0;
  regs.rflags = 0x2;
  if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0) _exit(kSetupFailed);
  for (;;) {
    if (ioctl(vcpu, KVM_RUN, 0) < 0) {
      if (errno == EINTR) continue;
      _exit(kSetupFailed);
    }
    if (run->exit_reason == KVM_EXIT_HLT) _exit(kHalted);
    _exit(kOtherExit);
  }
}

std::string Reason(int code) {
  switch (code) {
    case kNoDevice:
      return "the KVM device does not open";
    case kNoVm:
      return "KVM refuses to create a VM or vCPU";
    case kSetupFailed:
      return "KVM refuses the probe's guest memory or registers";
    case kOtherExit:
      return "the probe's vCPU stopped for another reason than HLT";
    default:
      return absl::StrCat("the probe ended with status ", code);
  }
}

}  // namespace

KvmProbe ProbeKvm(const std::string& device, absl::Duration deadline) {
  KvmProbe out;
  const absl::Time start = absl::Now();
  pid_t child = fork();
  if (child < 0) {
    out.reason = absl::StrCat("fork: ", std::strerror(errno));
    return out;
  }
  if (child == 0) RunLoop(device);
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  bool ended = false;
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    for (;;) {
      const int64_t left = absl::ToInt64Milliseconds(start + deadline - absl::Now());
      if (left < 0) break;
      const int n = poll(&p, 1, static_cast<int>(left) + 1);
      if (n < 0 && errno == EINTR) continue;
      ended = n > 0;
      break;
    }
    close(pidfd);
  }
  out.took = absl::Now() - start;
  if (!ended) kill(child, SIGKILL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ended) {
    out.reason = absl::StrCat("KVM does not run guests at a usable speed: the probe's ~4M "
                              "instructions did not finish in ",
                              absl::FormatDuration(deadline));
    out.took = deadline;
    return out;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  out.usable = code == kHalted;
  if (!out.usable) out.reason = Reason(code);
  return out;
}

absl::StatusOr<std::string> ChooseAccel(const std::string& configured, const KvmProbe& probe) {
  if (configured == "tcg") return std::string("tcg");
  if (configured == "auto") return std::string(probe.usable ? "kvm" : "tcg");
  if (configured != "kvm") {
    return absl::InvalidArgumentError(absl::StrCat("unknown accelerator ", configured));
  }
  if (!probe.usable) {
    return absl::FailedPreconditionError(
        absl::StrCat("accel \"kvm\" is configured, but ", probe.reason));
  }
  return std::string("kvm");
}

absl::StatusOr<std::string> QemuVersion(const std::string& qemu) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    char* argv[] = {const_cast<char*>(qemu.c_str()), const_cast<char*>("--version"), nullptr};
    char* envp[] = {nullptr};
    execve(argv[0], argv, envp);
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[512];
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  pollfd p{out[0], POLLIN, 0};
  while (text.size() < 4096 && absl::Now() < deadline) {
    const int n = poll(&p, 1, 100);
    if (n <= 0) continue;
    const ssize_t r = read(out[0], buf, sizeof(buf));
    if (r <= 0) break;
    text.append(buf, static_cast<size_t>(r));
  }
  close(out[0]);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::smatch m;
  static const std::regex kVersion("QEMU emulator version ([0-9]+\\.[0-9]+\\.[0-9]+)");
  if (!std::regex_search(text, m, kVersion)) {
    return absl::FailedPreconditionError(absl::StrCat(qemu, " --version names no QEMU version"));
  }
  return m[1].str();
}

std::string MicrovmFingerprint(const std::string& qemu_version, const std::string& accel) {
  return absl::StrCat("microvm/qemu-", qemu_version, " ", accel);
}

}  // namespace sn::microvm

// Whether KVM runs guests here, not merely whether /dev/kvm opens: on a nested host
// KVM_CREATE_VM succeeds while every guest instruction costs microseconds (qemu -accel kvm
// then hangs or crawls). The probe runs a real vCPU through a loop of about four million
// instructions in a child process under a deadline; KVM is usable only if the loop ends in
// HLT before the deadline (natively it takes a few milliseconds).
#ifndef SANDBOX_NODE_PRIVHELPER_MICROVM_KVM_PROBE_H_
#define SANDBOX_NODE_PRIVHELPER_MICROVM_KVM_PROBE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sn::microvm {

inline constexpr char kKvmDevice[] = "/dev/kvm";
inline constexpr absl::Duration kKvmProbeDeadline = absl::Milliseconds(500);

struct KvmProbe {
  bool usable = false;
  std::string reason;         // why not, for logs and `agent status` (set iff !usable)
  absl::Duration took;        // how long the vCPU ran (or the deadline)
};

// Runs the probe against `device` (kKvmDevice; tests pass another path).
KvmProbe ProbeKvm(const std::string& device, absl::Duration deadline = kKvmProbeDeadline);

// The configured accelerator ("kvm", "tcg" or "auto") resolved against the probe: "auto" is
// "kvm" when KVM is usable, else "tcg"; "kvm" that is not usable is FailedPrecondition (the
// provider reports virtualization_unavailable) with the probe's reason.
absl::StatusOr<std::string> ChooseAccel(const std::string& configured, const KvmProbe& probe);

// "X.Y.Z" from `<qemu> --version` (run with an empty environment, at most 2 s).
absl::StatusOr<std::string> QemuVersion(const std::string& qemu);

// The backend fingerprint (spec §3, at most 256 bytes): "microvm/qemu-<version> <accel>".
std::string MicrovmFingerprint(const std::string& qemu_version, const std::string& accel);

}  // namespace sn::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_MICROVM_KVM_PROBE_H_

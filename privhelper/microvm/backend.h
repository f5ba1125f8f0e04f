// The microVM provider's Backend (privhelper/backend.h): its probe and inventory counts, its
// image store, its native helper's flags, and what privhelper does for the helper's VmRequests
// (vm_host.h).
#ifndef SANDBOX_NODE_PRIVHELPER_MICROVM_BACKEND_H_
#define SANDBOX_NODE_PRIVHELPER_MICROVM_BACKEND_H_

#include <string>

#include "absl/status/statusor.h"
#include "privhelper/backend.h"
#include "privhelper/config.h"

namespace sn::microvm {

// REQUIRES: config.microvm is set (the configuration's parser guarantees it for provider
// "microvm"). The store directory is made (root 0755) when absent; qemu's version and the
// accelerator (the KVM probe, kvm_probe.h) are found now and again after a failed probe.
absl::StatusOr<privhelper::Backend> MakeMicrovmBackend(const privhelper::Config& config,
                                                       const std::string& installation_id);

// What collection asks of the VM store (privhelper/retirement_hooks.h): in_use is Unavailable
// while any VM of the generation is recorded (running or retained) or the inventory fails;
// forget_files removes the staged boot files of the journal's files (vm_host.h).
privhelper::RetirementHooks RetirementHooksFor(const std::string& store_dir);

// The vm_supervisor executable privhelper starts VMs with: beside privhelper's own executable
// (installed), else where Bazel puts it beside privhelper's.
std::string SupervisorPath();

}  // namespace sn::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_MICROVM_BACKEND_H_

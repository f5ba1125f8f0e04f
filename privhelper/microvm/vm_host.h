// privhelper's side of the microVM provider's VmRequests (proto/native_helper.proto): what the
// capability-less native helper cannot do to a VM, done by privhelper for a call it admitted,
// once privhelper/helpers/vm_permits.h permitted it (docs/architecture.md, "Who does what to a
// VM"). Every input comes from state privhelper owns, never from the helper:
//
//   boot of a create   the definition from the call's own arguments (its sandbox, command, env,
//                      cpu_millis, memory_bytes and their digest), the image privhelper
//                      resolved for the call, the kernel, firmware, guest agent and qemu's
//                      seccomp policy of the call's generation (its final configuration's
//                      artifacts, staged into the store, below); the overlay, the supervisor
//                      and qemu as the VM's uid.
//                      Refused before anything is written: Unavailable with runtime_missing
//                      when the release has no artifact of a boot kind or its stored file is
//                      gone; FailedPrecondition with configuration_invalid when the seccomp
//                      policy does not parse or compile (qemu_seccomp.h).
//                      Refused storage_exhausted (ResourceExhausted) when the store's free space
//                      would fall below microvm.free_space_floor_bytes.
//   boot of a resume   the VM's recorded definition (vm.json: root's, written at its create).
//   remove             the VM's directory, only while no supervisor of it runs.
// A resume or remove acts only on a VM recorded with the call's own generation (a helper of
// another generation — a Runtime helper of another release — never reaches it).
//
// Staged boot files: qemu runs as the VM's uid and cannot read privhelper's release store
// (root, 0700), so each kernel, firmware, guest agent and seccomp policy a VM boots with is
// copied once into
//   <store_dir>/files/                 root 0755
//     sha256-<64 hex>                  root 0444: exactly the bytes whose hash names it
// verified against the generation's recorded sha256 while copying (image_store.h's
// WriteContentFile: whole or absent; RemoveTemporaryFiles at start removes a torn copy).
#ifndef SANDBOX_NODE_PRIVHELPER_MICROVM_VM_HOST_H_
#define SANDBOX_NODE_PRIVHELPER_MICROVM_VM_HOST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "privhelper/config.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/native/microvm/vm_store.h"
#include "privhelper/store/plan.h"

namespace sn::microvm {

struct VmHostOptions {
  privhelper::MicrovmConfig config;
  std::string state_dir;   // privhelper's: the release store's artifact paths are under it
  std::string supervisor;  // the vm_supervisor executable
  std::string accel;       // "kvm" or "tcg": the probe's choice
  int host_cpus = 1;
  std::string cpu_cgroup_parent;  // MakeVmCgroupParent's directory (vm_cgroup.h)
};

// The artifacts of a generation privhelper holds (its final configuration's); NotFound for a
// generation it does not hold.
using ArtifactsFor = std::function<absl::StatusOr<std::vector<privhelper::store::PlannedArtifact>>(
    int64_t generation)>;

// The staged boot files of a generation (paths under <store_dir>/files).
struct BootFiles {
  std::string kernel, firmware, initramfs, seccomp;
  // Each file by the artifact kind it is staged from: the one list of the boot kinds.
  std::map<std::string_view, std::string*> ByKind();
  void Into(VmDefinition* def) const;
};

// Removes the staged copies (<store_dir>/files/sha256-<hex>) of `files` that are boot kinds
// (kernel, firmware, guest_agent, seccomp); one that is not there is skipped. A VM of another generation
// sharing the bytes loses nothing: its next boot stages them again from its own release.
absl::Status ForgetStagedFiles(const std::string& store_dir,
                               const std::vector<privhelper::store::PlannedArtifact>& files);

class VmHost {
 public:
  VmHost(VmHostOptions options, ArtifactsFor artifacts_for);

  // Runs a permitted VmRequest for the in-flight call `req` (HelperOptions::vm_actions).
  absl::Status Act(const privhelper::v1::ExecuteRequest& req,
                   const privhelper::ResolvedCall& resolved,
                   const privhelper::v1::VmRequest& vm);

  // The usability probe: boots a throwaway VM (<store_dir>/probe/, never in the inventory) from
  // the generation's boot files (above) and first image, and waits for its guest
  // agent's handshake; the VM is removed whatever the outcome. About a CPU-second under TCG:
  // run at start and after a failure, never per health report (backend.cc). The guest runs
  // only the generation's signed guest agent, no sandbox command; privhelper speaks to it
  // through the same bounded, strict channel as the helper.
  absl::Status ProbeBoot(int64_t generation);

  // The staged copy of a stored artifact (above): its path, copied and verified when absent.
  absl::StatusOr<std::string> Stage(const std::string& source_path, const std::string& sha256);

 private:
  absl::Status Boot(const privhelper::v1::ExecuteRequest& req,
                    const privhelper::ResolvedCall& resolved);
  // The free-space floor with every overlay's growth reserved: the store's free bytes, less
  // what its overlays can still take (VmStore::OverlayGrowthBytes) and `new_disk` (the ceiling
  // of an overlay about to be made, 0 for a resume), must stay at or above
  // free_space_floor_bytes; else ResourceExhausted (the create or resume is refused capacity,
  // nothing booted). A running guest filling its disk can then never take the store below
  // the floor. Called under boot_mu_, so two boots never both count the same free bytes.
  absl::Status CheckFreeSpace(int64_t new_disk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(boot_mu_);
  // The generation's boot files, staged (Stage) when absent; its seccomp policy checked.
  absl::StatusOr<BootFiles> StageBootFiles(int64_t generation);

  const VmHostOptions o_;
  const ArtifactsFor artifacts_for_;
  const VmStoreOptions store_options_;
  VmStore store_;
  absl::Mutex probe_mu_;
  // Held from the free-space check until the booted VM's overlay exists (and its supervisor is
  // started): the next boot's check counts that overlay.
  absl::Mutex boot_mu_;
  absl::Mutex stage_mu_;  // one copy at a time (each is whole or absent anyway)
};

}  // namespace sn::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_MICROVM_VM_HOST_H_

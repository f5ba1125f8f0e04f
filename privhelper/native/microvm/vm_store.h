// The microVM sandboxes of one installation: each VM's directory in the private store, its
// copy-on-write disk over the image's read-only base, its supervisor and guest agent, and
// the complete inventory that alone may answer "no such sandbox".
//
// Layout under `root` (created by privhelper, root-owned 0755):
//   vms/<sandbox_id>/            root 0755: what only the node writes
//     vm.json                    the definition (written once at create, durable first)
//     supervisor.json            the running supervisor (vm_process.h)
//     console.log                the bounded serial console (written by the supervisor)
//     agent.sock                 the guest channel: bound by the supervisor (root, 0600),
//                                listened on by qemu through an inherited descriptor
//     run/                       the VM's uid, 0700: what qemu itself writes
//       disk.qcow2               the sandbox's state: a qcow2 overlay over the image base
// Nothing qemu can write is ever read as a record: a qemu escaped into the VM's uid can
// change its disk and socket, never vm.json or supervisor.json.
//
// vm.json: {"schema":1,"sandbox_id":S,"generation":G,"args_digest":D,"image":PATH,
//           "kernel":PATH,"firmware":PATH,"initramfs":PATH,"seccomp":PATH,"cpu_millis":N,
//           "memory_bytes":N,"command":[...],"env":{...}}
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_VM_STORE_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_VM_STORE_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "privhelper/native/microvm/guest_channel.h"

namespace sn::microvm {

struct VmStoreOptions {
  std::string root;  // absolute; holds vms/
  uid_t vm_uid = 0;  // qemu's uid and gid: never root
  gid_t vm_gid = 0;
  std::string qemu = "/usr/bin/qemu-system-x86_64";
  std::string qemu_img = "/usr/bin/qemu-img";
  std::string supervisor;  // the vm_supervisor executable
  std::string accel = "tcg";
  int host_cpus = 1;
  // The directory of the CPU controller's hierarchy each VM's cgroup is made in (vm_cgroup.h:
  // <parent>/<leaf prefix><sandbox id>, its CPU quota exactly the VM's cpu_millis). privhelper
  // always sets it; "" (no quota) only in the store's own tests that run without a cgroup.
  std::string cpu_cgroup_parent;
  std::string cgroup_leaf_prefix;
  // The size of the disk each new VM's guest sees (privhelper's microvm.disk_bytes): its qcow2
  // overlay's virtual size, which bounds what the overlay can grow to. An image larger than
  // this is refused (a guest could not hold it).
  int64_t disk_bytes = int64_t{1} << 30;
  size_t console_bytes = 1 << 20;
  absl::Duration boot_deadline = absl::Seconds(60);
  // How long Stop gives the guest to sync and power off before the supervisor is killed: a
  // guest that ignores the request (hostile, or hung) costs the call this much, not its budget.
  absl::Duration power_off_grace = absl::Seconds(10);
};

// What an overlay of `virtual_bytes` can occupy at most: the guest's whole disk plus qcow2's
// metadata for it (64 KiB clusters: an L2 entry of 8 bytes and a refcount of 2 per cluster,
// rounded up to 1/4096 of the size, and 1 MiB for the header, L1 table and refcount table).
inline int64_t OverlayCeilingBytes(int64_t virtual_bytes) {
  return virtual_bytes + virtual_bytes / 4096 + (int64_t{1} << 20);
}

struct VmDefinition {
  std::string sandbox_id;
  int64_t generation = 0;
  std::string args_digest;  // create's arguments, for idempotent creates (spec §5)
  std::string image;        // the read-only base filesystem image
  std::string kernel;
  std::string firmware;
  std::string initramfs;
  std::string seccomp;  // qemu's seccomp policy (qemu_seccomp.h): a VM never boots without one
  int64_t cpu_millis = 0;
  int64_t memory_bytes = 0;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
};

enum class VmState { kRunning, kRetained };

struct VmEntry {
  VmDefinition definition;
  VmState state = VmState::kRetained;
};

std::string EncodeVmDefinition(const VmDefinition& d);
absl::StatusOr<VmDefinition> DecodeVmDefinition(std::string_view text);

class VmStore {
 public:
  explicit VmStore(VmStoreOptions options) : o_(std::move(options)) {}

  // The steps, by who may take them (docs/architecture.md, "Who does what to a VM"):
  //
  // privhelper (root): records the definition (vm.json, durable first: from then on the
  // inventory lists the sandbox) and makes the overlay. AlreadyExists when a VM of that id
  // exists (the caller compares args_digest).
  absl::Status Define(const VmDefinition& def);
  // privhelper: starts the recorded VM's supervisor and qemu unless one runs already (a
  // running VM is OK). NotFound when no VM of that id is recorded.
  absl::Status StartVm(const std::string& sandbox_id);
  // privhelper: removes the directory of a VM whose supervisor does not run (FailedPrecondition
  // while it runs); a VM that is not there is OK.
  absl::Status RemoveStopped(const std::string& sandbox_id);
  //
  // The native helper (no capability: it reads records, connects, signals by pidfd):
  // connects to the running VM's guest agent and starts the definition's main process.
  absl::Status StartMainProcess(const std::string& sandbox_id, absl::Time deadline);
  // kill_compute: the guest syncs and powers off (the supervisor is killed after
  // power_off_grace, or at the deadline if sooner, qemu with it); the overlay stays.
  absl::Status Stop(const std::string& sandbox_id, absl::Time deadline);
  //
  // All steps in one process (tests, which run as root): Define + StartVm + StartMainProcess;
  // StartVm + StartMainProcess; Stop + RemoveStopped.
  absl::Status Create(const VmDefinition& def);
  absl::Status Resume(const std::string& sandbox_id);
  absl::Status Remove(const std::string& sandbox_id, absl::Time deadline);

  // Every VM of the store with its state: complete, or Unavailable (never a partial list).
  absl::StatusOr<std::vector<VmEntry>> Inventory();
  // One VM: from its own directory when there is one (its definition and supervisor record;
  // Unavailable when either cannot be read); NotFound only when the complete listing has no
  // such directory.
  absl::StatusOr<VmEntry> Find(const std::string& sandbox_id);

  // How many more bytes the store's overlays can take on the filesystem: for each VM's overlay,
  // its virtual size plus the qcow2 metadata a full disk needs (OverlayCeilingBytes), less what
  // it holds now; running and retained VMs alike (a retained one grows again once resumed).
  // The virtual size is read from the overlay's qcow2 header (bounded: a regular file, not
  // followed, 1 TiB at most); a header that does not parse counts as disk_bytes. Unavailable
  // when the store cannot be listed.
  absl::StatusOr<int64_t> OverlayGrowthBytes();

  // A connected, handshaken channel to a running VM's guest agent.
  absl::StatusOr<std::unique_ptr<GuestChannel>> Connect(const std::string& sandbox_id,
                                                        absl::Time deadline);

 private:
  std::string VmDir(const std::string& id) const;
  std::string CgroupLeaf(const std::string& id) const;  // "" without cpu_cgroup_parent
  absl::Status StartSupervisor(const VmDefinition& def);
  absl::Status MakeOverlay(const VmDefinition& def);

  VmStoreOptions o_;
};

}  // namespace sn::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_VM_STORE_H_

// The microVM provider's operations (spec §5), run inside the native helper: sandboxes are the
// VMs of the installation's private store (vm_store.h). What the helper cannot do itself — it
// has no capability: it cannot exec, chown or drop to the VM's uid — it asks privhelper for,
// through the call's VmRequest (boot for create and resume, remove for kill and
// delete_retained; privhelper/helpers/vm_permits.h); everything else it does itself: the
// inventory (the store's records and a pidfd per running supervisor), the guest channel (start
// the main process, exec, files, power-off) and stopping a VM (power-off, else SIGKILL of its
// supervisor by pidfd at the deadline).
//
// Outcome rules (provider.h): `not_found`/`absent` only from a complete inventory of the store;
// any failure before privhelper was asked to act is `unavailable`; an action whose outcome is
// unknown is `uncertain`. The guest is hostile: what it answers is checked by the channel
// (guest_channel.h) and never reaches Core but as the operation's result.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_MICROVM_OPS_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_MICROVM_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "privhelper/native/microvm/channel_pool.h"
#include "privhelper/native/microvm/vm_store.h"
#include "privhelper/native/provider.h"
#include "proto/guest_agent.pb.h"

namespace sn::native::microvm {

// A VM sandbox's native id: "vm-" + its sandbox id (docs/protocol.md, "microVM native ids").
std::string NativeId(const std::string& sandbox_id);

class MicrovmOperations final : public Provider {
 public:
  // `store_root`: the store directory privhelper's `microvm.store_dir` names.
  MicrovmOperations(std::string store_root, int64_t generation);

  // OpenSSL's configuration and digest (the create digest), before the serving filter; then
  // the helper's file access confined to reading its store and /proc (landlock.h).
  absl::Status PrepareForSandbox() override;

  pb::ExecuteResponse Create(const pb::CreateArgs& a, const Call& call) override;
  pb::ExecuteResponse Resume(const pb::ResumeArgs& a, const Call& call) override;
  pb::ExecuteResponse Kill(const pb::SandboxArgs& a, const Call& call) override;
  pb::ExecuteResponse KillCompute(const pb::SandboxArgs& a, const Call& call) override;
  pb::ExecuteResponse DeleteRetained(const pb::SandboxArgs& a, const Call& call) override;
  pb::ExecuteResponse Inspect(const pb::SandboxArgs& a, const Call& call) override;
  pb::ExecuteResponse Exec(const pb::ExecArgs& a, const Call& call) override;
  pb::ExecuteResponse WriteFile(const pb::WriteFileArgs& a, const Call& call) override;
  pb::ExecuteResponse ReadFile(const pb::ReadFileArgs& a, const Call& call) override;

 private:
  // One exchange with a running sandbox's guest agent (exec, write_file, read_file): the VM is
  // looked up (not_found, conflict when stopped or of another generation), the channel opened
  // and the request answered before the call's deadline. Sets *error on failure.
  std::optional<::sn::guest::v1::FromGuest> Exchange(
      const std::string& sandbox_id, ::sn::guest::v1::ToGuest request,
      CallControl* ctl, pb::ErrorCode* error);

  const std::string root_;
  // create and resume: privhelper boots the VM (VmRequest), then the helper starts its main
  // process; a VM whose main process did not start is stopped (retained). *boot_failed tells
  // privhelper's refusal or failure of the boot (its status) from the start's.
  absl::Status BootAndStart(std::string_view op, const std::string& sandbox_id,
                            CallControl* ctl, bool* boot_failed);

  ::sn::microvm::VmStore store_;
  // One kept guest channel per VM for exec and files (channel_pool.h); forgotten before a
  // VM's stop or start.
  ::sn::microvm::GuestChannelPool channels_;
  const int64_t generation_;
};

}  // namespace sn::native::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_MICROVM_OPS_H_

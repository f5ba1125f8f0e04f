#include "privhelper/helpers/vm_permits.h"

#include "proto/operation_of.h"

namespace sn::privhelper {

std::optional<std::string> VmRequestBreach(const v1::ExecuteRequest& call,
                                           const v1::VmRequest& vm, const VmPermitState& state) {
  if (state.outstanding) return "a second VmRequest while one of the call is unanswered";
  const std::optional<Operation> op = OperationOf(call);
  if (vm.has_boot()) {
    if (op != Operation::kCreate && op != Operation::kResume) {
      return "boot for a call that is not a create or resume";
    }
    if (state.booted) return "a second boot in one call";
  } else if (vm.has_remove()) {
    if (op != Operation::kKill && op != Operation::kDeleteRetained) {
      return "remove for a call that is not a kill or delete_retained";
    }
    if (state.removed) return "a second remove in one call";
  } else {
    return "a VmRequest without an action";
  }
  if (vm.sandbox_id() != SandboxIdOf(call)) return "a VmRequest for another sandbox than the call's";
  return std::nullopt;
}

void NoteVmRequest(const v1::VmRequest& vm, VmPermitState* state) {
  state->outstanding = true;
  if (vm.has_boot()) state->booted = true;
  if (vm.has_remove()) state->removed = true;
}

}  // namespace sn::privhelper

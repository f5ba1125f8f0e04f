// privhelper's permit table for the native helper's VmRequest (proto/native_helper.proto): what
// a helper may ask privhelper to do to a VM, checked against the call privhelper itself has in
// flight, never against anything the helper says about it.
//
//   action   permitted for the call's operation   sandbox            at most
//   boot     create, resume                        the call's own     once per call
//   remove   kill, delete_retained                 the call's own     once per call
//
// and only while the call is in flight, with no other VmRequest of the call unanswered, from
// a helper whose provider has VMs (privhelper's backend handles VmRequests). Anything else is a
// breach: the helper is killed (it loses its connection, as an agent that breaks the RPC
// permit table does). A request for a call privhelper issued but no longer tracks (its caller
// left or its budget ended while the helper worked) is not a breach: it is answered
// FailedPrecondition and nothing is done.
#ifndef SANDBOX_NODE_PRIVHELPER_HELPERS_VM_PERMITS_H_
#define SANDBOX_NODE_PRIVHELPER_HELPERS_VM_PERMITS_H_

#include <optional>
#include <string>

#include "proto/native_helper.pb.h"
#include "proto/privhelper.pb.h"

namespace sn::privhelper {

// What a call in flight has asked for so far.
struct VmPermitState {
  bool booted = false;
  bool removed = false;
  bool outstanding = false;  // a VmRequest of the call is not answered yet
};

// Why `vm` breaks the table for the in-flight call `call` (whose state is `state`), or nullopt
// when it is permitted (the caller then records it in `state`).
std::optional<std::string> VmRequestBreach(const v1::ExecuteRequest& call,
                                           const v1::VmRequest& vm, const VmPermitState& state);

// Records a permitted request in `state`.
void NoteVmRequest(const v1::VmRequest& vm, VmPermitState* state);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_HELPERS_VM_PERMITS_H_

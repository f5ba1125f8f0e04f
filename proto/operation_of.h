// The one mapping between ExecuteRequest's `operation` oneof and the authored operation table
// (common/operations.def). privhelper's checks, its mutation rule, its capacity slots and the
// native helper's dispatch all go through it. The mapping is generated from the table: a oneof
// case without a table line, or a table line without its oneof case, does not compile
// (-Werror=switch); tests/common/operations_test.cc checks the names and message types.
#ifndef SANDBOX_NODE_PROTO_OPERATION_OF_H_
#define SANDBOX_NODE_PROTO_OPERATION_OF_H_

#include <optional>
#include <string>

#include "common/operations.h"
#include "proto/privhelper.pb.h"

namespace sn::privhelper {

// The operation a request names; nullopt when none is set.
std::optional<Operation> OperationOf(const v1::ExecuteRequest& r);

// The operation's argument message (r.create(), r.kill(), ...); nullptr when none is set.
const google::protobuf::Message* ArgumentsOf(const v1::ExecuteRequest& r);

// The sandbox the request names (every operation that runs in privhelper names one); "" when
// no operation is set.
const std::string& SandboxIdOf(const v1::ExecuteRequest& r);

// resume's reconciliation_only; false for every other operation.
bool ReconciliationOnly(const v1::ExecuteRequest& r);

// Whether the request mutates (the authored rule: resume only when not reconciliation-only).
// REQUIRES: OperationOf(r) has a value.
bool IsMutationRequest(const v1::ExecuteRequest& r);

// The capacity slot the request holds while in flight (Slot::kNone when none is set).
Slot SlotOfRequest(const v1::ExecuteRequest& r);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PROTO_OPERATION_OF_H_

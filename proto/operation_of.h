// The one mapping between ExecuteRequest's `operation` oneof and the authored operation table
// (common/operations.def). privhelper's checks, its mutation rule and the native helper's
// dispatch all go through it; tests/common/operations_test.cc checks that the oneof has
// exactly one field per operation that runs in privhelper, named as the table names it.
#ifndef SANDBOX_NODE_PROTO_OPERATION_OF_H_
#define SANDBOX_NODE_PROTO_OPERATION_OF_H_

#include <optional>

#include "common/operations.h"
#include "proto/privhelper.pb.h"

namespace sn::privhelper {

// The operation a request names; nullopt when none is set.
std::optional<Operation> OperationOf(const v1::ExecuteRequest& r);

// Whether the request mutates (the authored rule: resume only when not reconciliation-only).
// REQUIRES: OperationOf(r) has a value.
bool IsMutationRequest(const v1::ExecuteRequest& r);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PROTO_OPERATION_OF_H_

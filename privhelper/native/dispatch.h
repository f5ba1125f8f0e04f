// The native helper's checks before any native I/O, in this order: a call without an
// operation, or with an argument outside spec §5 (common/wire/argument_rules.h, the rules the
// agent's codec and privhelper also apply: the helper defends itself), is `invalid`; a call
// whose operation is undeclared or declared unsupported is answered `unsupported` with the
// exact operation and the authored reason; a call for another generation, or with no budget
// left, is `unconfirmed`.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_DISPATCH_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_DISPATCH_H_

#include <optional>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/provider_operations.h"
#include "proto/privhelper.pb.h"

namespace sn::native {

// The §5 name of the request's operation ("" when none is set).
std::string_view OperationName(const privhelper::v1::ExecuteRequest& r);

// True iff every argument of the request's operation is within spec §5.
bool ArgumentsWithinSpec(const privhelper::v1::ExecuteRequest& r);

// Whether the in-flight sandbox ids privhelper sent beside the request (HelperCall
// in_flight_sandbox_ids, docs/protocol.md 22a) keep their rules: only with create, a starting
// resume (bound max_active) or kill_compute (bound max_retained); fewer than the bound (none
// for a bound of 0 or 1); each a sandbox uuid, distinct, never the request's own sandbox. A
// list breaking them is a confused privhelper: the call is refused `invalid`, since counting
// it could let the bound be exceeded.
bool InFlightIdsWellFormed(const privhelper::v1::ExecuteRequest& r,
                           const std::vector<std::string>& ids, int64_t max_active,
                           int64_t max_retained);

// The answer to give without native I/O, or nullopt when the call may run.
std::optional<privhelper::v1::ExecuteResponse> EarlyOutcome(
    std::span<const OperationDeclaration> table, std::string_view provider, int64_t generation,
    const privhelper::v1::ExecuteRequest& r);

}  // namespace sn::native

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_DISPATCH_H_

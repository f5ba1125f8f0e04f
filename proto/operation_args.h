// The §4-§5 argument rules over the proto's operation messages, one function per argument
// message, with the same rule functions the agent's codec uses (common/wire/argument_rules.h).
// Two lines of defence share it: privhelper's re-check of every ExecuteRequest
// (privhelper/rpc/execute_check.cc) and the native helper's own check before any native I/O
// (privhelper/native/dispatch.cc). Pure functions.
#ifndef SANDBOX_NODE_PROTO_OPERATION_ARGS_H_
#define SANDBOX_NODE_PROTO_OPERATION_ARGS_H_

#include <cstddef>
#include <optional>
#include <string>

#include "proto/privhelper.pb.h"

namespace sn::privhelper {

// The first argument of the request's operation that breaks its rule, as
// "<operation>.<member>" (e.g. "create.env"; never the value), or nullopt when every argument
// keeps its rule; "operation" when none is set. `payload_bytes` is the size of the operation's
// payload (exec.stdin, write_file.content) as the caller knows it; nullopt when the payload is
// malformed, which then breaks at its member. Ignored for operations without a payload.
std::optional<std::string> BrokenArgument(const v1::ExecuteRequest& r,
                                          std::optional<size_t> payload_bytes);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PROTO_OPERATION_ARGS_H_

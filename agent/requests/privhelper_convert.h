// Conversions between the wire request/outcome and privhelper's Execute messages.
// Included only by .cc files (protobuf headers).
#ifndef SANDBOX_NODE_AGENT_REQUESTS_PRIVHELPER_CONVERT_H_
#define SANDBOX_NODE_AGENT_REQUESTS_PRIVHELPER_CONVERT_H_

#include <string>

#include "agent/requests/executor.h"
#include "common/wire/frames.h"
#include "proto/privhelper.pb.h"

namespace sn::agent {

namespace pb = ::sn::privhelper::v1;

// Fills `out` (request id, generation, operation and arguments) from the wire request; create
// names the specification's image name, which privhelper resolves itself. False for observe
// (the agent answers it from its record).
bool ToProto(const wire::Request& r, pb::ExecuteRequest* out);

// `r` without its payload bytes (write_file content, exec stdin): what FromProto needs to
// interpret the answer, without keeping a second copy of up to 48 MiB while the call runs.
wire::Request WithoutPayload(const wire::Request& r);

// Converts privhelper's answer into the wire outcome. A typed refusal answers its error_code.
// Malformed evidence (a refusal without an error code included) never becomes a success: a
// mutation answers uncertain, a read unavailable. A create_settled receipt gets `digest`, the
// request's generation's specification digest; with an empty `digest` no receipt is made.
ExecOutcome FromProto(const wire::Request& r, const pb::ExecuteResponse& resp,
                      const std::string& digest);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_REQUESTS_PRIVHELPER_CONVERT_H_

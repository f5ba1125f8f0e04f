// Conversions between the wire request/outcome and privhelper's Execute messages.
// Included only by .cc files (protobuf headers).
#ifndef SANDBOX_NODE_AGENT_PRIVHELPER_CONVERT_H_
#define SANDBOX_NODE_AGENT_PRIVHELPER_CONVERT_H_

#include <string>

#include "agent/executor.h"
#include "agent/privhelper_executor.h"
#include "common/wire/frames.h"
#include "proto/privhelper.pb.h"

namespace sn::agent {

namespace pb = ::sn::privhelper::v1;

// Fills `out` from the wire request. False for observe, and when create names an image
// without a native reference (the request queue checks image names first, so that is a
// configuration fault).
bool ToProto(const wire::Request& r, const PrivhelperExecutorOptions& opt,
             pb::ExecuteRequest* out);

// Converts privhelper's answer into the wire outcome. Malformed evidence never becomes a
// success: a mutation answers uncertain, a read unavailable. A create_settled receipt gets the
// enrolled `digest`.
ExecOutcome FromProto(const wire::Request& r, const pb::ExecuteResponse& resp,
                      const std::string& digest);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_PRIVHELPER_CONVERT_H_

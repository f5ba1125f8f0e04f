// The value rules of a request's §4–§5 members, each named once. Two lines of defence use
// them: the agent's codec (decode_request.cc) checks every decoded value with these functions
// and answers `invalid`, and privhelper re-checks every ExecuteRequest it receives with the
// very same functions (privhelper/rpc/execute_check.cc), so the two can never drift apart.
// Every number comes from limits.h. Pure functions; true iff the value is allowed.
//
// Strings: the codec has already proven that a decoded string is valid UTF-8 without NUL;
// privhelper's proto strings have not, so every string rule also requires IsWireString.
#ifndef SANDBOX_NODE_COMMON_WIRE_ARGUMENT_RULES_H_
#define SANDBOX_NODE_COMMON_WIRE_ARGUMENT_RULES_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/wire/limits.h"
#include "common/wire/validate.h"

namespace sn::wire::rules {

// §4 request members.
inline bool RequestId(std::string_view s) { return IsUuid(s); }
inline bool Generation(int64_t g) { return g > 0; }
inline bool TimeoutMs(int64_t t) { return t >= kMinTimeoutMs && t <= kMaxTimeoutMs; }

// §5 arguments.
inline bool SandboxId(std::string_view s) { return IsUuid(s); }
inline bool ImageName(std::string_view s) { return IsWireString(s, kMaxImageNameBytes); }
inline bool CommandCount(size_t n) { return n <= kMaxCommandArgs; }
inline bool CommandArg(std::string_view s) { return IsWireString(s, kMaxArgBytes); }
inline bool EnvCount(size_t n) { return n <= kMaxEnvEntries; }
inline bool EnvKey(std::string_view s) { return IsEnvKey(s); }
inline bool EnvValue(std::string_view s) { return IsWireString(s, kMaxEnvValueBytes); }
inline bool CpuMillis(int64_t v) { return v >= kMinCpuMillis && v <= kMaxCpuMillis; }
inline bool MemoryBytes(int64_t v) { return v >= kMinMemoryBytes && v <= kMaxMemoryBytes; }
inline bool ArgvCount(size_t n) { return n >= kMinExecArgv && n <= kMaxExecArgv; }
inline bool ArgvArg(std::string_view s) { return IsWireString(s, kMaxArgBytes); }
inline bool StdinBytes(size_t n) { return n <= kMaxStdinBytes; }
inline bool OutputLimitBytes(int64_t v) { return v >= 0 && v <= kMaxOutputLimitBytes; }
inline bool FilePath(std::string_view s) {
  return IsSandboxPath(s) && IsWireString(s, kMaxPathBytes);
}
inline bool FileContentBytes(size_t n) { return n <= kMaxFileContentBytes; }
inline bool FileMode(int64_t v) { return v >= 0 && v <= kMaxFileMode; }
inline bool ReadMaxBytes(int64_t v) { return v >= 0 && v <= kMaxReadFileBytes; }
inline bool OperationId(std::string_view s) { return IsUuid(s); }

}  // namespace sn::wire::rules

#endif  // SANDBOX_NODE_COMMON_WIRE_ARGUMENT_RULES_H_

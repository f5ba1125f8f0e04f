// What every provider answers the same way (provider.h's outcome rules): the response shapes,
// the capacity count with the calls in flight, and the digest of a create's arguments that
// makes a repeated create idempotent (spec §5: same arguments -> the existing sandbox;
// different -> conflict).
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_OUTCOMES_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_OUTCOMES_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "privhelper/native/provider.h"

namespace sn::native {

pb::ExecuteResponse ErrorResponse(pb::ErrorCode code, const CallControl& ctl);
pb::ExecuteResponse SandboxOk(const std::string& sandbox_id, const std::string& native_id,
                              pb::SandboxState state, const CallControl& ctl);
pb::ExecuteResponse NoResultOk(const CallControl& ctl);

// Whether the call's deadline passed or its caller cancelled.
bool Expired(const CallControl& ctl);

// How many sandboxes there would be in a state once this call's own sandbox joins it: the
// `counted` native objects a complete inventory shows in it, plus each sandbox of the other
// calls in flight (privhelper's reservations: they may put theirs there) and `own` that is not
// among the inventory's `counted_sandboxes` yet, each once (docs/protocol.md 22a).
int64_t CountWithInFlight(int64_t counted, const std::set<std::string>& counted_sandboxes,
                          const std::vector<std::string>& in_flight, const std::string& own);

// The SHA-256 (hex) of a create's arguments that decide what the sandbox is: image, command,
// env, cpu_millis and memory_bytes (the sandbox id names it; nothing else is part of it).
std::string CreateArgsDigest(const pb::CreateArgs& a);

}  // namespace sn::native

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_OUTCOMES_H_

// privhelper's second line of defence for Execute: every §4-§5 bound of the request, checked
// with the same rule functions the agent's codec uses (common/wire/argument_rules.h), then the
// request resolved against state privhelper owns (the installation identity, the generations
// it holds, their images, its configured capacity). Nothing the agent claims beyond the
// request's own arguments is trusted. Pure functions; no I/O.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_EXECUTE_CHECK_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_EXECUTE_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "privhelper/helpers/helper_manager.h"
#include "privhelper/store/generations.h"
#include "proto/privhelper.pb.h"

namespace sn::privhelper {

struct Refusal {
  v1::Refusal kind = v1::REFUSAL_NONE;
  v1::ErrorCode code = v1::ERROR_CODE_NONE;  // what the agent answers on the wire
  std::string reason;                         // for privhelper's log (never argument values)

  bool refused() const { return kind != v1::REFUSAL_NONE; }
};

// Checks the request's own members: ids, budget, the operation and every argument's bound.
// The request is the first message of the Execute stream: its payload member (write_file
// content, exec stdin) is empty and payload_bytes declares the payload that follows, whose size
// is checked here against the payload's rule. REFUSAL_ARGUMENTS + ERROR_CODE_INVALID on the
// first broken rule (the reason names the member, never its value); none otherwise.
Refusal CheckArguments(const v1::ExecuteRequest& r);

// Reads the Execute stream's payload after its request: exactly `bytes` in chunks of at most
// kMaxPayloadChunkBytes, into the request's payload member, then the client's half-close.
// `next` yields the stream's messages (false at its end). REFUSAL_ARGUMENTS on any deviation
// (a short or long payload, an empty, oversized or non-payload message, anything after it).
Refusal ReadPayload(const std::function<bool(v1::ExecuteMessage*)>& next, size_t bytes,
                    v1::ExecuteRequest* req);

struct ResolveContext {
  std::string_view installation_id;  // the identity privhelper owns
  const store::GenerationStore* generations = nullptr;
  int64_t max_active = 0;            // privhelper's configuration
  int64_t max_retained = 0;
};

// Resolves a request whose arguments passed CheckArguments: another installation ->
// REFUSAL_INSTALLATION (unavailable); a generation privhelper does not hold ->
// REFUSAL_GENERATION_NOT_HELD (unconfirmed); a create image the held specification does not
// name -> REFUSAL_ARGUMENTS (invalid). On success fills `out` from privhelper's own state.
Refusal Resolve(const v1::ExecuteRequest& r, const ResolveContext& ctx, ResolvedCall* out);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_EXECUTE_CHECK_H_

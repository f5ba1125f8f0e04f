// The fuzz oracle for privhelper's Execute checks (tests/fuzz/execute_request_fuzzer.cc):
//   - SpecViolation: spec/wire.md §4-§5 read afresh, written without common/wire/validate.h or
//     argument_rules.h, so a slip in the shared rules shows up as a disagreement with
//     privhelper's CheckArguments instead of being checked against itself;
//   - ToWireRequest / FromWireRequest: the same request as the codec carries it (the wire
//     `request` frame) and as the agent hands it to privhelper, so CheckArguments can be
//     compared with the codec on the same arguments in both directions.
// Pure functions; test-only.
#ifndef SANDBOX_NODE_TESTS_FUZZ_EXECUTE_ORACLE_H_
#define SANDBOX_NODE_TESTS_FUZZ_EXECUTE_ORACLE_H_

#include <cstddef>
#include <optional>
#include <string>

#include "common/wire/frames.h"
#include "proto/privhelper.pb.h"

namespace sn::fuzz {

// The largest declared payload ToWireRequest materialises (the fuzzer's speed bound).
inline constexpr size_t kMaxMaterialisedPayloadBytes = 4096;

// Why `r` breaks a rule privhelper must enforce on an Execute request (the first message of
// the stream: payload members empty, payload_bytes declaring what follows), or nullopt when it
// breaks none. Covers the §4 request members privhelper sees (request_id, generation, budget),
// every §5 argument, the stream's payload declaration and unknown fields anywhere.
std::optional<std::string> SpecViolation(const privhelper::v1::ExecuteRequest& r);

// Whether `r` has a wire form: exactly one operation, no unknown fields, payload members
// empty, payload_bytes 0 for operations without a payload and within
// [0, kMaxMaterialisedPayloadBytes] for exec/write_file. Any other request cannot be said on
// the wire at all.
bool HasWireForm(const privhelper::v1::ExecuteRequest& r);

// The wire request carrying `r`'s members (REQUIRES: HasWireForm(r)): id = request_id,
// timeout_ms = budget_ms, the arguments member by member, command/env present iff non-empty,
// exec stdin present iff payload_bytes > 0, and a payload of payload_bytes bytes (a fixed
// pattern) as stdin/content. The envelope (connection_id, owner_epoch, sequence) is valid.
// String members are copied as they are, valid or not: the codec is the judge.
wire::Request ToWireRequest(const privhelper::v1::ExecuteRequest& r);

// The first message of the Execute stream the agent sends for the wire request `w` (its
// privhelper_convert.cc ToProto, then TakePayload): the arguments member by member, the payload
// (exec stdin, write_file content) taken out and declared by payload_bytes. installation_id is
// left empty. REQUIRES: w carries no request_error and is not an observe.
privhelper::v1::ExecuteRequest FromWireRequest(const wire::Request& w);

// The payload ToWireRequest puts into a request declaring `bytes`.
std::string PatternPayload(size_t bytes);

}  // namespace sn::fuzz

#endif  // SANDBOX_NODE_TESTS_FUZZ_EXECUTE_ORACLE_H_

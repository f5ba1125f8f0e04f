// The Execute stream's framing (proto/privhelper.proto, ExecuteMessage), shared by its two
// ends: the agent splits a request's payload off into chunks, privhelper checks and reassembles
// them. Message bounds of the agent <-> privhelper channel live here too.
#ifndef SANDBOX_NODE_PROTO_EXECUTE_STREAM_H_
#define SANDBOX_NODE_PROTO_EXECUTE_STREAM_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/wire/limits.h"
#include "proto/privhelper.pb.h"

namespace sn::privhelper {

// The largest payload chunk.
inline constexpr size_t kMaxPayloadChunkBytes = size_t{256} << 10;
// The largest message the agent sends privhelper: a request without its payload (a create
// with every argument at its limit is about 0.6 MiB), a payload chunk, or a specification
// (RegisterGeneration, at most 1 MiB).
inline constexpr size_t kMaxRequestMessageBytes = wire::kMaxHttpBodyBytes + (size_t{64} << 10);
// The largest message privhelper sends the agent: a read_file result (48 MiB of content) or an
// exec result (32 MiB of output), plus the other members.
inline constexpr size_t kMaxResponseMessageBytes =
    static_cast<size_t>(wire::kMaxReadFileBytes) + (size_t{1} << 20);

// privhelper's admission bound (privhelper/rpc/admission.h): the request bytes (each admitted
// Execute call's request message plus its payload) of the Execute calls it holds at once; two
// maximal write_file calls. Over it, privhelper refuses a call typed (REFUSAL_ADMISSION) before
// any native I/O. The agent queues a payload until its calls fit this bound (docs/protocol.md
// 23a), counting each call with a payload as its payload plus kMaxRequestMessageBytes, which is
// never less than what privhelper counts for it (the request message is one message the agent
// sends, so it is at most kMaxRequestMessageBytes).
inline constexpr size_t kMaxInflightRequestBytes = size_t{128} << 20;

// The member of `r` that carries its payload (write_file.content, exec.stdin), or nullptr for
// an operation without one.
std::string* MutablePayload(v1::ExecuteRequest* r);
const std::string* Payload(const v1::ExecuteRequest& r);

// Moves `r`'s payload out (setting payload_bytes) and returns it.
std::string TakePayload(v1::ExecuteRequest* r);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PROTO_EXECUTE_STREAM_H_

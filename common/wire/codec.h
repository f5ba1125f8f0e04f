// The strict frame codec (spec/wire.md §2-§5). Decode validates every rule while it reads:
// a streaming pull parser goes straight into the typed structs of frames.h, so duplicate
// members, number spelling and string escapes are seen as written (a DOM would hide them).
#ifndef SANDBOX_NODE_COMMON_WIRE_CODEC_H_
#define SANDBOX_NODE_COMMON_WIRE_CODEC_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/wire/frames.h"
#include "common/wire/limits.h"

namespace sn::wire {

// Decodes one frame received by `receiver`. `size_limit` is the receiver's current limit
// (kMaxControlFrameBytes before welcome/hello, else kMaxFrameBytes).
//   - OK: the frame. A `Request` with `request_error` set is envelope-valid and earns an
//     `invalid` response; the connection stays open.
//   - ResourceExhausted: over a size limit (close 1009).
//   - InvalidArgument: any other violation (close 1008). The message is a specific,
//     human-readable reason naming the member (never echoing member values).
absl::StatusOr<Frame> Decode(std::string_view bytes, Role receiver,
                             size_t size_limit = kMaxFrameBytes);

// The close code for a Decode error: 1009 for ResourceExhausted, 1008 otherwise.
int CloseCodeForDecodeError(const absl::Status& status);

// Checks a response's raw `result` text against the pending request's operation (Core side).
absl::StatusOr<Result> DecodeResult(Operation op, std::string_view raw_result_json);

// Encodes a frame as compact JSON. REQUIRES: the frame is valid (what Decode would accept);
// Encode(Decode(x)) decodes to an equal frame.
std::string Encode(const Frame& frame);

// Encodes the recorded form of a response (no type/version/connection_id) and decodes it
// back; used by the node's durable operation record.
std::string EncodeRecordedResponse(const RecordedResponse& r);
//
// Without the operation, a recorded `result` is typed by its shape; a {sandbox_id, native_id,
// state: "running"} result is identical for create and resume and decodes as CreateResult.
// The overload with the recorded operation types it exactly and also checks that a success of
// an operation with a result carries one.
absl::StatusOr<RecordedResponse> DecodeRecordedResponse(std::string_view json);
absl::StatusOr<RecordedResponse> DecodeRecordedResponse(Operation op, std::string_view json);

}  // namespace sn::wire

#endif  // SANDBOX_NODE_COMMON_WIRE_CODEC_H_

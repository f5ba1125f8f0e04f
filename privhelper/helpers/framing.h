// Length-prefixed protobuf messages on a stream socket (privhelper <-> native helper): a 4-byte
// big-endian length, then that many bytes of one serialized message
// (proto/native_helper.proto).
//
// Neither side holds a frame twice: writers serialize straight into the socket through a
// small buffer (the length comes from ByteSizeLong), readers parse from the socket through a
// stream bounded to the frame's length, so a 48 MiB write_file costs its bytes once on each
// side, not three times. REQUIRES for every call: one writer (and one reader) per fd at a time.
#ifndef SANDBOX_NODE_PRIVHELPER_HELPERS_FRAMING_H_
#define SANDBOX_NODE_PRIVHELPER_HELPERS_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/wire/limits.h"

namespace google::protobuf {
class MessageLite;
}

namespace sn::privhelper {

namespace v1 {
class ExecuteRequest;
}

// The helper protocol privhelper speaks (HelperReady.protocol_version). A helper announcing
// another version is killed and refused (HelperFailure::kProtocolMismatch). 2: HelperCall
// carries in_flight_sandbox_ids, which a helper must count for the capacity bound to hold
// (docs/protocol.md 22a); a helper of version 1 would ignore them. 3: the microVM provider's
// VmRequest / VmAnswer, which a privhelper of version 2 would leave unanswered.
inline constexpr uint32_t kHelperProtocolVersion = 3;
// The reason a VmAnswer carries, at most (privhelper cuts longer ones).
inline constexpr size_t kMaxVmAnswerMessageBytes = 512;

// A frame carries at most one spec request (its arguments, whose JSON frame is at most
// wire::kMaxFrameBytes and never smaller than their protobuf form) or one response (at most
// 48 MiB of file content) plus the envelope privhelper adds (call id, resolved image,
// capacity, the in-flight sandbox ids: fewer than the 64 calls privhelper admits at once, 37
// bytes each): the spec maximum plus framing.
inline constexpr size_t kHelperEnvelopeBytes = 64 * 1024;
inline constexpr size_t kMaxFrameBytes = wire::kMaxFrameBytes + kHelperEnvelopeBytes;
// The helper's first message (HelperReady) is small; privhelper reads it with this bound.
inline constexpr size_t kMaxReadyFrameBytes = 4096;

// Writes one frame (blocking; retries on EINTR; no SIGPIPE). ResourceExhausted when the
// message exceeds kMaxFrameBytes (nothing is written then).
absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& msg);

// The HelperCall privhelper sends, fields as in native_helper.proto.
struct CallEnvelope {
  uint64_t call_id = 0;
  int64_t budget_ms = 0;  // replaces request.budget_ms (the time left when the call is written)
  std::string_view native_image;
  int64_t max_active = 0;
  int64_t max_retained = 0;
  std::span<const std::string> in_flight_sandbox_ids;
};

// Writes HelperToChild{call: HelperCall{call_id, request, native_image, max_active,
// max_retained, in_flight_sandbox_ids}} without copying `request`: the envelope is composed around the request's own
// serialization. request.budget_ms is replaced by env.budget_ms by appending the field after
// the request's bytes (protobuf keeps the last value of a repeated scalar field).
absl::Status WriteCallFrame(int fd, const v1::ExecuteRequest& request, const CallEnvelope& env);

// Reads one frame into `msg` (blocking), parsing it from the socket. OutOfRange at a clean EOF
// before a frame starts; DataLoss for a truncated, oversized (> max_bytes) or unparsable
// frame (the stream is then out of step: stop reading it).
absl::Status ReadFrame(int fd, google::protobuf::MessageLite* msg,
                       size_t max_bytes = kMaxFrameBytes);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_HELPERS_FRAMING_H_

// The guest channel's framing (proto/guest_agent.proto): a 4-byte big-endian length, then
// one serialized message. Shared by the host end (guest_channel.h, which adds deadlines and
// per-request bounds) and the guest agent (guest/, static, no gRPC: the native helper's
// framing, privhelper/helpers/framing.h, links privhelper's gRPC protos).
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_GUEST_FRAMES_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_GUEST_FRAMES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace google::protobuf {
class MessageLite;
}

namespace sn::guest {

inline constexpr size_t kFrameHeaderBytes = 4;

// The header and body of one frame.
std::string EncodeFrame(const google::protobuf::MessageLite& msg);
// The body length a header announces.
uint32_t FrameLength(const char header[kFrameHeaderBytes]);

// Blocking reads and writes for the guest's side of the port. ReadGuestFrame waits at most
// `idle_ms` for a frame's first byte (DeadlineExceeded, nothing consumed), then reads the
// whole frame; Unavailable at EOF (no host), DataLoss for a frame above `max_bytes` or one
// that does not parse (the stream is then out of step: the caller waits for the next host).
absl::Status ReadGuestFrame(int fd, google::protobuf::MessageLite* msg, size_t max_bytes,
                            int idle_ms);
absl::Status WriteGuestFrame(int fd, const google::protobuf::MessageLite& msg);

}  // namespace sn::guest

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_GUEST_FRAMES_H_

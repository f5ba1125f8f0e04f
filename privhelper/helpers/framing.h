// Length-prefixed protobuf messages on a stream socket (privhelper <-> native helper): a 4-byte
// big-endian length, then that many bytes of one serialized message.
#ifndef SANDBOX_NODE_PRIVHELPER_HELPERS_FRAMING_H_
#define SANDBOX_NODE_PRIVHELPER_HELPERS_FRAMING_H_

#include <cstddef>

#include "absl/status/status.h"

namespace google::protobuf {
class MessageLite;
}

namespace sn::privhelper {

inline constexpr size_t kMaxFrameBytes = 80 * 1024 * 1024;

// Writes one frame (blocking; retries on EINTR; no SIGPIPE). REQUIRES: callers serialize
// writers on one fd.
absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& msg);

// Reads one frame into `msg` (blocking). OutOfRange at a clean EOF before a frame starts;
// DataLoss for a truncated, oversized or unparsable frame.
absl::Status ReadFrame(int fd, google::protobuf::MessageLite* msg);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_HELPERS_FRAMING_H_

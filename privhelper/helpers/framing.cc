#include "privhelper/helpers/framing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <google/protobuf/message_lite.h>

#include "common/atomic_file.h"

namespace sn::privhelper {
namespace {

absl::Status WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "frame write");
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Reads exactly n bytes; *eof_at_start is set when the peer closed before the first byte.
absl::Status ReadAll(int fd, char* p, size_t n, bool* eof_at_start) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "frame read");
    }
    if (r == 0) {
      if (got == 0 && eof_at_start != nullptr) {
        *eof_at_start = true;
        return absl::OutOfRangeError("peer closed");
      }
      return absl::DataLossError("truncated frame");
    }
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& msg) {
  std::string body;
  if (!msg.SerializeToString(&body)) return absl::InternalError("frame: serialize failed");
  if (body.size() > kMaxFrameBytes) return absl::ResourceExhaustedError("frame too large");
  uint32_t n = static_cast<uint32_t>(body.size());
  char head[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                  static_cast<char>(n >> 8), static_cast<char>(n)};
  std::string buf(head, 4);
  buf += body;
  return WriteAll(fd, buf.data(), buf.size());
}

absl::Status ReadFrame(int fd, google::protobuf::MessageLite* msg) {
  unsigned char head[4];
  bool eof = false;
  absl::Status s = ReadAll(fd, reinterpret_cast<char*>(head), 4, &eof);
  if (!s.ok()) return s;
  uint32_t n = (uint32_t{head[0]} << 24) | (uint32_t{head[1]} << 16) | (uint32_t{head[2]} << 8) |
               uint32_t{head[3]};
  if (n > kMaxFrameBytes) return absl::DataLossError("frame too large");
  std::string body(n, '\0');
  s = ReadAll(fd, body.data(), n, nullptr);
  if (!s.ok()) return s;
  if (!msg->ParseFromString(body)) return absl::DataLossError("frame does not parse");
  return absl::OkStatus();
}

}  // namespace sn::privhelper

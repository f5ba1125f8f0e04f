#include "privhelper/native/microvm/guest_frames.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <google/protobuf/message_lite.h>

#include "absl/strings/str_cat.h"

namespace sn::guest {
namespace {

absl::Status ReadExactly(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::UnavailableError(absl::StrCat("read: ", std::strerror(errno)));
    if (r == 0) return absl::UnavailableError("end of stream");
    p += r;
    n -= static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeFrame(const google::protobuf::MessageLite& msg) {
  std::string body = msg.SerializeAsString();
  const uint32_t n = static_cast<uint32_t>(body.size());
  std::string out = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 8), static_cast<char>(n)};
  out += body;
  return out;
}

uint32_t FrameLength(const char header[kFrameHeaderBytes]) {
  return (uint32_t{static_cast<unsigned char>(header[0])} << 24) |
         (uint32_t{static_cast<unsigned char>(header[1])} << 16) |
         (uint32_t{static_cast<unsigned char>(header[2])} << 8) |
         uint32_t{static_cast<unsigned char>(header[3])};
}

absl::Status ReadGuestFrame(int fd, google::protobuf::MessageLite* msg, size_t max_bytes,
                            int idle_ms) {
  pollfd p{fd, POLLIN, 0};
  int n = poll(&p, 1, idle_ms);
  if (n == 0) return absl::DeadlineExceededError("idle");
  if (n < 0) return absl::UnavailableError(absl::StrCat("poll: ", std::strerror(errno)));
  if ((p.revents & POLLIN) == 0) return absl::UnavailableError("no host on the port");
  char header[kFrameHeaderBytes];
  if (absl::Status s = ReadExactly(fd, header, sizeof(header)); !s.ok()) return s;
  const uint32_t len = FrameLength(header);
  if (len > max_bytes) return absl::DataLossError(absl::StrCat("a frame of ", len, " bytes"));
  std::string body(len, '\0');
  if (absl::Status s = ReadExactly(fd, body.data(), len); !s.ok()) return s;
  if (!msg->ParseFromString(body)) return absl::DataLossError("a frame that does not parse");
  return absl::OkStatus();
}

absl::Status WriteGuestFrame(int fd, const google::protobuf::MessageLite& msg) {
  const std::string frame = EncodeFrame(msg);
  size_t done = 0;
  while (done < frame.size()) {
    ssize_t w = write(fd, frame.data() + done, frame.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return absl::UnavailableError(absl::StrCat("write: ", std::strerror(errno)));
    done += static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace sn::guest

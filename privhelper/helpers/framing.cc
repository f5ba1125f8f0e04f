#include "privhelper/helpers/framing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "common/atomic_file.h"
#include "proto/native_helper.pb.h"

namespace sn::privhelper {
namespace {

namespace io = ::google::protobuf::io;
using ::google::protobuf::internal::WireFormatLite;

// Socket writes through the adaptor's buffer: send() with MSG_NOSIGNAL (a closed peer is an
// error, never SIGPIPE), retried on EINTR.
class SocketOutput final : public io::CopyingOutputStream {
 public:
  explicit SocketOutput(int fd) : fd_(fd) {}
  bool Write(const void* buffer, int size) override {
    const char* p = static_cast<const char*>(buffer);
    size_t n = static_cast<size_t>(size);
    while (n > 0) {
      ssize_t w = send(fd_, p, n, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EINTR) continue;
        errno_ = errno;
        return false;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  int error() const { return errno_; }

 private:
  const int fd_;
  int errno_ = 0;
};

// Reads of one frame's body: never past its end, so the next frame stays in the socket.
class FrameInput final : public io::CopyingInputStream {
 public:
  FrameInput(int fd, size_t length) : fd_(fd), remaining_(length) {}
  int Read(void* buffer, int size) override {
    if (remaining_ == 0) return 0;
    size_t want = std::min(remaining_, static_cast<size_t>(size));
    for (;;) {
      ssize_t r = read(fd_, buffer, want);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        errno_ = errno;
        return -1;
      }
      if (r == 0) {
        truncated_ = true;
        return 0;
      }
      remaining_ -= static_cast<size_t>(r);
      return static_cast<int>(r);
    }
  }
  bool truncated() const { return truncated_; }
  int error() const { return errno_; }

 private:
  const int fd_;
  size_t remaining_;
  bool truncated_ = false;
  int errno_ = 0;
};

constexpr int kBufferBytes = 64 * 1024;

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
      if (got == 0) {
        *eof_at_start = true;
        return absl::OutOfRangeError("peer closed");
      }
      return absl::DataLossError("truncated frame header");
    }
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

void WriteHeader(io::CodedOutputStream* out, size_t n) {
  const uint32_t v = static_cast<uint32_t>(n);
  const uint8_t head[4] = {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16),
                           static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
  out->WriteRaw(head, 4);
}

size_t TagSize(int field, WireFormatLite::WireType type) {
  return io::CodedOutputStream::VarintSize32(WireFormatLite::MakeTag(field, type));
}

// Serializes through `write` into a socket-backed stream; the status of the whole write.
template <typename Fn>
absl::Status Emit(int fd, Fn write) {
  SocketOutput socket(fd);
  {
    io::CopyingOutputStreamAdaptor adaptor(&socket, kBufferBytes);
    {
      io::CodedOutputStream out(&adaptor);
      write(&out);
      if (out.HadError()) return ErrnoStatus(socket.error(), "frame write");
    }
    if (!adaptor.Flush()) return ErrnoStatus(socket.error(), "frame write");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& msg) {
  const size_t n = msg.ByteSizeLong();
  if (n > kMaxFrameBytes) return absl::ResourceExhaustedError("frame too large");
  return Emit(fd, [&](io::CodedOutputStream* out) {
    WriteHeader(out, n);
    msg.SerializeWithCachedSizes(out);
  });
}

absl::Status WriteCallFrame(int fd, const v1::ExecuteRequest& request, const CallEnvelope& env) {
  using WT = WireFormatLite;
  constexpr int kCall = v1::HelperToChild::kCallFieldNumber;
  constexpr int kId = v1::HelperCall::kCallIdFieldNumber;
  constexpr int kRequest = v1::HelperCall::kRequestFieldNumber;
  constexpr int kImage = v1::HelperCall::kNativeImageFieldNumber;
  constexpr int kActive = v1::HelperCall::kMaxActiveFieldNumber;
  constexpr int kRetained = v1::HelperCall::kMaxRetainedFieldNumber;
  constexpr int kInFlight = v1::HelperCall::kInFlightSandboxIdsFieldNumber;
  constexpr int kBudget = v1::ExecuteRequest::kBudgetMsFieldNumber;

  const size_t request_bytes = request.ByteSizeLong();
  if (request_bytes > kMaxFrameBytes) return absl::ResourceExhaustedError("frame too large");
  const size_t budget_bytes = TagSize(kBudget, WT::WIRETYPE_VARINT) + WT::Int64Size(env.budget_ms);
  const size_t request_field = request_bytes + budget_bytes;
  size_t call_bytes =
      TagSize(kRequest, WT::WIRETYPE_LENGTH_DELIMITED) + WT::LengthDelimitedSize(request_field);
  if (env.call_id != 0) call_bytes += TagSize(kId, WT::WIRETYPE_VARINT) + WT::UInt64Size(env.call_id);
  if (!env.native_image.empty()) {
    call_bytes += TagSize(kImage, WT::WIRETYPE_LENGTH_DELIMITED) +
                  WT::LengthDelimitedSize(env.native_image.size());
  }
  if (env.max_active != 0) {
    call_bytes += TagSize(kActive, WT::WIRETYPE_VARINT) + WT::Int64Size(env.max_active);
  }
  if (env.max_retained != 0) {
    call_bytes += TagSize(kRetained, WT::WIRETYPE_VARINT) + WT::Int64Size(env.max_retained);
  }
  for (const std::string& id : env.in_flight_sandbox_ids) {
    call_bytes += TagSize(kInFlight, WT::WIRETYPE_LENGTH_DELIMITED) + WT::LengthDelimitedSize(id.size());
  }
  const size_t frame_bytes =
      TagSize(kCall, WT::WIRETYPE_LENGTH_DELIMITED) + WT::LengthDelimitedSize(call_bytes);
  if (frame_bytes > kMaxFrameBytes) return absl::ResourceExhaustedError("frame too large");

  return Emit(fd, [&](io::CodedOutputStream* out) {
    WriteHeader(out, frame_bytes);
    out->WriteTag(WT::MakeTag(kCall, WT::WIRETYPE_LENGTH_DELIMITED));
    out->WriteVarint32(static_cast<uint32_t>(call_bytes));
    if (env.call_id != 0) {
      out->WriteTag(WT::MakeTag(kId, WT::WIRETYPE_VARINT));
      out->WriteVarint64(env.call_id);
    }
    out->WriteTag(WT::MakeTag(kRequest, WT::WIRETYPE_LENGTH_DELIMITED));
    out->WriteVarint32(static_cast<uint32_t>(request_field));
    request.SerializeWithCachedSizes(out);  // sizes cached by ByteSizeLong above
    out->WriteTag(WT::MakeTag(kBudget, WT::WIRETYPE_VARINT));
    out->WriteVarint64(static_cast<uint64_t>(env.budget_ms));
    if (!env.native_image.empty()) {
      out->WriteTag(WT::MakeTag(kImage, WT::WIRETYPE_LENGTH_DELIMITED));
      out->WriteVarint32(static_cast<uint32_t>(env.native_image.size()));
      out->WriteRaw(env.native_image.data(), static_cast<int>(env.native_image.size()));
    }
    if (env.max_active != 0) {
      out->WriteTag(WT::MakeTag(kActive, WT::WIRETYPE_VARINT));
      out->WriteVarint64(static_cast<uint64_t>(env.max_active));
    }
    if (env.max_retained != 0) {
      out->WriteTag(WT::MakeTag(kRetained, WT::WIRETYPE_VARINT));
      out->WriteVarint64(static_cast<uint64_t>(env.max_retained));
    }
    for (const std::string& id : env.in_flight_sandbox_ids) {
      out->WriteTag(WT::MakeTag(kInFlight, WT::WIRETYPE_LENGTH_DELIMITED));
      out->WriteVarint32(static_cast<uint32_t>(id.size()));
      out->WriteRaw(id.data(), static_cast<int>(id.size()));
    }
  });
}

absl::Status ReadFrame(int fd, google::protobuf::MessageLite* msg, size_t max_bytes) {
  unsigned char head[4];
  bool eof = false;
  absl::Status s = ReadAll(fd, reinterpret_cast<char*>(head), 4, &eof);
  if (!s.ok()) return s;
  const uint32_t n = (uint32_t{head[0]} << 24) | (uint32_t{head[1]} << 16) |
                     (uint32_t{head[2]} << 8) | uint32_t{head[3]};
  if (n > max_bytes || n > kMaxFrameBytes) return absl::DataLossError("frame too large");
  FrameInput input(fd, n);
  bool parsed;
  {
    io::CopyingInputStreamAdaptor adaptor(&input, kBufferBytes);
    parsed = msg->ParseFromBoundedZeroCopyStream(&adaptor, static_cast<int>(n));
  }
  if (input.error() != 0) return ErrnoStatus(input.error(), "frame read");
  if (input.truncated()) return absl::DataLossError("truncated frame");
  if (!parsed) return absl::DataLossError("frame does not parse");
  return absl::OkStatus();
}

}  // namespace sn::privhelper

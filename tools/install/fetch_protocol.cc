#include "tools/install/fetch_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/release/failure.h"
#include "common/release/layout.h"
#include "common/status_macros.h"

namespace sn::install::fetchwire {
namespace {

constexpr size_t kHeaderBytes = 4;

bool KnownKind(uint8_t k) {
  return k >= static_cast<uint8_t>(Kind::kReady) && k <= static_cast<uint8_t>(Kind::kResult);
}

// Debian's Abseil has its own string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }


// Reads exactly `n` bytes, each wait bounded by `deadline`. `started` says whether a frame
// has begun (EOF is then a truncation, not the end of the stream).
absl::Status ReadExactly(int fd, char* buf, size_t n, absl::Time deadline, bool started) {
  size_t got = 0;
  while (got < n) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("no answer in time");
    pollfd p{fd, POLLIN, 0};
    // -1 (no timeout) for an infinite deadline: the child waits for root's next request.
    const int ms = left == absl::InfiniteDuration()
                       ? -1
                       : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left),
                                                            int64_t{1} << 30) + 1);
    int rc = poll(&p, 1, ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return ErrnoStatus(errno, "poll");
    if (rc == 0) continue;  // the loop re-checks the deadline
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r < 0) return ErrnoStatus(errno, "read");
    if (r == 0) {
      if (!started && got == 0) return absl::OutOfRangeError("end of stream");
      return OutOfProtocol("a frame cut short");
    }
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

bool Printable(char c) { return c >= 0x20 && c < 0x7f; }

}  // namespace

absl::Status OutOfProtocol(std::string_view what) {
  return absl::DataLossError(absl::StrCat("out of protocol: ", Av(what)));
}

size_t MaxResultBytes() {
  // status (code, class, message) + three strings of metadata, each with its length.
  return 64 + kMaxMessageBytes + release::kMaxManifestBytes + release::kMaxSignatureFileBytes +
         release::kMaxSumsBytes + 64;
}

absl::Status WriteFrame(int fd, Kind kind, std::string_view payload) {
  const uint32_t n = static_cast<uint32_t>(payload.size() + 1);
  std::string frame;
  frame.reserve(kHeaderBytes + n);
  for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>(n >> shift));
  frame.push_back(static_cast<char>(kind));
  frame.append(payload);
  std::string_view rest = frame;
  while (!rest.empty()) {
    ssize_t w = send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ErrnoStatus(errno, "write a frame");
    rest.remove_prefix(static_cast<size_t>(w));
  }
  return absl::OkStatus();
}

absl::StatusOr<Frame> ReadFrame(int fd, size_t max_bytes, absl::Time deadline) {
  unsigned char header[kHeaderBytes];
  absl::Status s = ReadExactly(fd, reinterpret_cast<char*>(header), kHeaderBytes, deadline, false);
  if (!s.ok()) return s;
  const uint32_t n = (uint32_t{header[0]} << 24) | (uint32_t{header[1]} << 16) |
                     (uint32_t{header[2]} << 8) | uint32_t{header[3]};
  if (n == 0) return OutOfProtocol("an empty frame");
  if (n > max_bytes) {
    return OutOfProtocol(absl::StrCat("a frame of ", n, " bytes (at most ", max_bytes, " here)"));
  }
  std::string body(n, '\0');
  s = ReadExactly(fd, body.data(), n, deadline, true);
  if (!s.ok()) return s;
  const uint8_t k = static_cast<uint8_t>(body[0]);
  if (!KnownKind(k)) return OutOfProtocol(absl::StrCat("a frame of unknown kind ", k));
  Frame f;
  f.kind = static_cast<Kind>(k);
  f.payload = body.substr(1);
  return f;
}

FieldWriter& FieldWriter::U64(uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out_.push_back(static_cast<char>(v >> shift));
  return *this;
}

FieldWriter& FieldWriter::Str(std::string_view s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  for (int shift = 24; shift >= 0; shift -= 8) out_.push_back(static_cast<char>(n >> shift));
  out_.append(s);
  return *this;
}

bool FieldReader::Fail(std::string_view field, std::string_view why) {
  if (status_.ok()) status_ = OutOfProtocol(absl::StrCat(Av(field), ": ", Av(why)));
  return false;
}

bool FieldReader::U64(std::string_view field, uint64_t* out) {
  if (!status_.ok()) return false;
  if (in_.size() < 8) return Fail(field, "cut short");
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in_[i]);
  in_.remove_prefix(8);
  *out = v;
  return true;
}

bool FieldReader::I64(std::string_view field, int64_t* out) {
  uint64_t v = 0;
  if (!U64(field, &v)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

bool FieldReader::Str(std::string_view field, size_t max_bytes, std::string* out) {
  if (!status_.ok()) return false;
  if (in_.size() < 4) return Fail(field, "cut short");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(in_[i]);
  if (n > max_bytes) return Fail(field, absl::StrCat(n, " bytes, at most ", max_bytes));
  if (in_.size() - 4 < n) return Fail(field, "cut short");
  out->assign(in_.substr(4, n));
  in_.remove_prefix(4 + n);
  return true;
}

absl::Status FieldReader::Finish() {
  if (status_.ok() && !in_.empty()) status_ = OutOfProtocol("trailing bytes");
  return status_;
}

// ---- status ------------------------------------------------------------------------------

void PutStatus(FieldWriter& w, const absl::Status& s) {
  uint64_t failure = 0;
  if (std::optional<release::FailureClass> c = release::FailureClassOf(s); c.has_value()) {
    failure = 1 + static_cast<uint64_t>(*c);
  }
  std::string_view message(s.message().data(), s.message().size());
  if (message.size() > kMaxMessageBytes) message = message.substr(0, kMaxMessageBytes);
  w.U64(static_cast<uint64_t>(s.code())).U64(failure).Str(message);
}

bool GetStatus(FieldReader& r, absl::Status* out) {
  uint64_t code = 0, failure = 0;
  std::string message;
  if (!r.U64("status code", &code) || !r.U64("failure class", &failure) ||
      !r.Str("status message", kMaxMessageBytes, &message)) {
    return false;
  }
  if (code > static_cast<uint64_t>(absl::StatusCode::kUnauthenticated)) {
    return r.Fail("status code", "out of range");
  }
  for (char& c : message) {
    if (!Printable(c)) c = '?';
  }
  const auto status_code = static_cast<absl::StatusCode>(code);
  if (status_code == absl::StatusCode::kOk) {
    *out = absl::OkStatus();
    return failure == 0 ? true : r.Fail("failure class", "on an OK status");
  }
  switch (failure) {
    case 0: *out = absl::Status(status_code, message); return true;
    case 1: *out = release::ProvenanceFailure(message); break;
    case 2: *out = release::TransferFailure(message); break;
    case 3: *out = release::ChecksumFailure(message); break;
    default: return r.Fail("failure class", "out of range");
  }
  if (out->code() != status_code) return r.Fail("failure class", "with another status code");
  return true;
}

}  // namespace sn::install::fetchwire

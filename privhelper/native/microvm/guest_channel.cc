#include "privhelper/native/microvm/guest_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"
#include "common/wire/limits.h"
#include "privhelper/native/microvm/guest_frames.h"

namespace sn::microvm {
namespace {

using guest::v1::ErrorCode_IsValid;
using guest::v1::FromGuest;
using guest::v1::ToGuest;

absl::Status Broken(std::string_view rule) {
  return absl::DataLossError(absl::StrCat("the guest's answer breaks the channel: ", AV(rule)));
}

// The answer kind a request expects (FromGuest's oneof case).
FromGuest::AnswerCase ExpectedAnswer(ToGuest::RequestCase request) {
  switch (request) {
    case ToGuest::kHello:
      return FromGuest::kReady;
    case ToGuest::kExec:
      return FromGuest::kExec;
    case ToGuest::kWriteFile:
      return FromGuest::kWriteFile;
    case ToGuest::kReadFile:
      return FromGuest::kReadFile;
    case ToGuest::kStart:
    case ToGuest::kSync:
    case ToGuest::kPoweroff:
      return FromGuest::kDone;
    case ToGuest::REQUEST_NOT_SET:
      break;
  }
  return FromGuest::ANSWER_NOT_SET;
}

bool Printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

absl::Status CheckExec(const guest::v1::Exec& request, const guest::v1::ExecResult& r) {
  if (r.exit_code() < 0 || r.exit_code() > 255 + 128) return Broken("an exit code out of range");
  const size_t output = r.stdout().size() + r.stderr().size();
  if (output > static_cast<size_t>(std::max<int64_t>(request.output_limit_bytes(), 0))) {
    return Broken("more output than the exec's output limit");
  }
  return absl::OkStatus();
}

absl::Status CheckRead(const guest::v1::ReadFile& request, const guest::v1::ReadFileResult& r) {
  const int64_t max = std::max<int64_t>(request.max_bytes(), 0);
  if (static_cast<int64_t>(r.content().size()) > max) return Broken("more bytes than max_bytes");
  if (r.size() < static_cast<int64_t>(r.content().size())) {
    return Broken("a file size below the bytes sent");
  }
  if (r.truncated() != (r.size() > static_cast<int64_t>(r.content().size()))) {
    return Broken("truncated disagrees with the file size and the bytes sent");
  }
  return absl::OkStatus();
}

}  // namespace

size_t MaxAnswerBytes(const ToGuest& request) {
  switch (request.request_case()) {
    case ToGuest::kExec:
      return static_cast<size_t>(
                 std::clamp<int64_t>(request.exec().output_limit_bytes(), 0,
                                     wire::kMaxOutputLimitBytes)) +
             kGuestEnvelopeBytes;
    case ToGuest::kReadFile:
      return static_cast<size_t>(std::clamp<int64_t>(request.read_file().max_bytes(), 0,
                                                      wire::kMaxReadFileBytes)) +
             kGuestEnvelopeBytes;
    default:
      return kGuestEnvelopeBytes;
  }
}

absl::StatusOr<FromGuest> CheckAnswer(const ToGuest& request, std::string_view frame) {
  if (frame.size() > MaxAnswerBytes(request)) return Broken("an answer above its bound");
  FromGuest a;
  if (!a.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
    return Broken("an answer that does not parse");
  }
  if (a.id() != request.id()) return Broken("an answer to another request");
  if (a.answer_case() == FromGuest::kError) {
    const guest::v1::Error& e = a.error();
    if (e.code() == guest::v1::ERROR_NONE || !ErrorCode_IsValid(e.code())) {
      return Broken("an error without a known code");
    }
    if (e.message().size() > kMaxGuestErrorBytes || !Printable(e.message())) {
      return Broken("an error message too long or not printable ASCII");
    }
    return a;
  }
  if (a.answer_case() != ExpectedAnswer(request.request_case())) {
    return Broken("an answer of another kind");
  }
  switch (a.answer_case()) {
    case FromGuest::kReady:
      if (a.ready().nonce() != request.hello().nonce()) return Broken("a Ready with another nonce");
      if (a.ready().protocol_version() != kGuestProtocolVersion) {
        return Broken("another guest protocol version");
      }
      if (a.ready().kernel_release().size() > kMaxKernelReleaseBytes ||
          !Printable(a.ready().kernel_release())) {
        return Broken("a kernel release too long or not printable ASCII");
      }
      break;
    case FromGuest::kExec:
      if (absl::Status s = CheckExec(request.exec(), a.exec()); !s.ok()) return s;
      break;
    case FromGuest::kReadFile:
      if (absl::Status s = CheckRead(request.read_file(), a.read_file()); !s.ok()) return s;
      break;
    case FromGuest::kWriteFile:
      if (a.write_file().size() != static_cast<int64_t>(request.write_file().content().size())) {
        return Broken("a written size other than the content's");
      }
      break;
    default:
      break;
  }
  return a;
}

GuestChannel::GuestChannel(int fd) : fd_(fd) {
  int flags = fcntl(fd_, F_GETFL);
  if (flags >= 0) fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  fcntl(fd_, F_SETFD, FD_CLOEXEC);
}

GuestChannel::~GuestChannel() { Close(); }

bool GuestChannel::Quiet() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

void GuestChannel::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::StatusOr<std::unique_ptr<GuestChannel>> GuestChannel::Connect(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket");
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, "connect " + path);
  }
  return std::make_unique<GuestChannel>(fd);
}

namespace {

// Waits until `fd` is ready for `events` or `deadline` passes (false then).
absl::StatusOr<bool> WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p{fd, events, 0};
    // At most a minute per poll (an infinite deadline's remainder is INT64_MAX ms: clamp before
    // rounding up).
    const int ms = static_cast<int>(
        std::min<int64_t>(absl::ToInt64Milliseconds(std::min(left, absl::Minutes(1))) + 1, 60000));
    int n = poll(&p, 1, ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "poll on the guest channel");
    if (n > 0) return true;
  }
}

}  // namespace

absl::Status GuestChannel::WriteAll(std::string_view bytes, absl::Time deadline) {
  while (!bytes.empty()) {
    ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      absl::StatusOr<bool> ready = WaitFor(fd_, POLLOUT, deadline);
      if (!ready.ok()) return ready.status();
      if (!*ready) return absl::DeadlineExceededError("the guest stopped reading its channel");
      continue;
    }
    return absl::UnavailableError(absl::StrCat("the guest channel is closed (",
                                               n < 0 ? std::strerror(errno) : "no progress", ")"));
  }
  return absl::OkStatus();
}

absl::Status GuestChannel::ReadExactly(char* out, size_t n, absl::Time deadline) {
  while (n > 0) {
    ssize_t got = read(fd_, out, n);
    if (got > 0) {
      out += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return absl::UnavailableError("the guest closed its channel");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("reading the guest channel: ", std::strerror(errno)));
    }
    absl::StatusOr<bool> ready = WaitFor(fd_, POLLIN, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) return absl::DeadlineExceededError("the guest did not answer in time");
  }
  return absl::OkStatus();
}


absl::StatusOr<FromGuest> GuestChannel::ReadAnswer(const ToGuest& request, absl::Time deadline) {
  for (;;) {
    char header[4];
    absl::Status s = ReadExactly(header, sizeof(header), deadline);
    if (!s.ok()) return s;
    const uint32_t length = guest::FrameLength(header);
    // A late Ready is at most the envelope; anything larger must be this request's answer.
    const size_t bound = std::max(MaxAnswerBytes(request), kGuestEnvelopeBytes);
    if (length > bound) {
      return Broken(absl::StrCat("a frame of ", length, " bytes, above the ", bound,
                                 " this request allows"));
    }
    std::string body(length, '\0');
    if (s = ReadExactly(body.data(), body.size(), deadline); !s.ok()) return s;
    FromGuest peek;
    if (!unanswered_hellos_.empty() && peek.ParseFromString(body) && peek.id() != request.id()) {
      auto it = unanswered_hellos_.find(peek.id());
      if (it != unanswered_hellos_.end()) {
        absl::StatusOr<FromGuest> late = CheckAnswer(it->second, body);
        if (!late.ok()) return late.status();
        unanswered_hellos_.erase(it);
        continue;
      }
    }
    return CheckAnswer(request, body);
  }
}

absl::StatusOr<FromGuest> GuestChannel::Call(ToGuest request, absl::Time deadline) {
  if (fd_ < 0) return absl::UnavailableError("the guest channel is closed");
  request.set_id(next_id_++);
  absl::Status s = WriteAll(guest::EncodeFrame(request), deadline);
  absl::StatusOr<FromGuest> answer = s.ok() ? ReadAnswer(request, deadline) : s;
  if (!answer.ok()) Close();
  return answer;
}

absl::StatusOr<std::unique_ptr<GuestChannel>> GuestChannel::ConnectAndHandshake(
    const std::string& path, absl::Time deadline, guest::v1::Ready* ready,
    const std::function<absl::Status()>& still_running) {
  absl::Status last = absl::DeadlineExceededError("no attempt");
  while (absl::Now() < deadline) {
    if (still_running) {
      if (absl::Status alive = still_running(); !alive.ok()) return alive;
    }
    absl::StatusOr<std::unique_ptr<GuestChannel>> c = Connect(path);
    if (c.ok()) {
      absl::StatusOr<guest::v1::Ready> r = (*c)->Handshake(deadline);
      if (r.ok()) {
        if (ready != nullptr) *ready = *r;
        return c;
      }
      if (!absl::IsUnavailable(r.status())) return r.status();
      last = r.status();
    } else {
      last = c.status();
    }
    usleep(20 * 1000);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the guest agent did not answer before the deadline (last: ", last.message(), ")"));
}

absl::StatusOr<guest::v1::Ready> GuestChannel::Handshake(absl::Time deadline) {
  std::random_device rd;
  std::mt19937_64 gen((uint64_t{rd()} << 32) | rd());
  // The guest may not have opened its port yet (what we write then is lost): each Hello waits
  // a short while, then another is sent. An answer to any Hello of this connection ends the
  // handshake; the others' answers, if they come, are skipped by later calls.
  constexpr absl::Duration kRetry = absl::Milliseconds(250);
  constexpr size_t kMaxHellos = 256;
  while (absl::Now() < deadline) {
    if (fd_ < 0) return absl::UnavailableError("the guest channel is closed");
    ToGuest hello;
    hello.set_id(next_id_++);
    hello.mutable_hello()->set_nonce(gen());
    if (unanswered_hellos_.size() >= kMaxHellos) unanswered_hellos_.erase(unanswered_hellos_.begin());
    unanswered_hellos_.emplace(hello.id(), hello);
    if (absl::Status s = WriteAll(guest::EncodeFrame(hello), deadline); !s.ok()) {
      Close();
      return s;
    }
    absl::StatusOr<bool> readable = WaitFor(fd_, POLLIN, std::min(deadline, absl::Now() + kRetry));
    if (!readable.ok()) return readable.status();
    if (!*readable) continue;
    // Whatever arrives now answers one of our Hellos: read it as the answer to the newest
    // (ReadAnswer takes an older one's as late and then waits for this one's).
    absl::StatusOr<FromGuest> a = ReadAnswer(hello, deadline);
    if (!a.ok()) {
      Close();
      return a.status();
    }
    if (a->answer_case() != FromGuest::kReady) {
      Close();
      return Broken("an error answer to Hello");
    }
    unanswered_hellos_.erase(hello.id());
    return a->ready();
  }
  return absl::DeadlineExceededError("the guest agent did not answer Hello before the deadline");
}

}  // namespace sn::microvm

// The host end of the guest channel against a hostile guest on a socketpair: every way a
// guest can flood, garble or stall its channel costs the host one bounded, failed call on
// that channel and nothing else.
#include "privhelper/native/microvm/guest_channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "privhelper/native/microvm/guest_frames.h"

namespace sn::microvm {
namespace {

using guest::v1::FromGuest;
using guest::v1::ToGuest;

// A guest on the other end of a socketpair: for each request it reads, `answer` writes
// whatever it likes on the raw fd.
class FakeGuest {
 public:
  using Answer = std::function<void(int fd, const ToGuest& request)>;
  explicit FakeGuest(Answer answer) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    host_fd_ = sv[0];
    guest_fd_ = sv[1];
    thread_ = std::thread([this, answer = std::move(answer)] {
      for (;;) {
        ToGuest r;
        absl::Status s = guest::ReadGuestFrame(guest_fd_, &r, size_t{64} << 20, 10000);
        if (!s.ok()) return;
        answer(guest_fd_, r);
      }
    });
  }
  ~FakeGuest() {
    shutdown(guest_fd_, SHUT_RDWR);
    thread_.join();
    close(guest_fd_);
  }
  int host_fd() const { return host_fd_; }

 private:
  int host_fd_ = -1;
  int guest_fd_ = -1;
  std::thread thread_;
};

void Send(int fd, const FromGuest& a) { ASSERT_TRUE(guest::WriteGuestFrame(fd, a).ok()); }
void SendRaw(int fd, const std::string& bytes) {
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}
std::string Header(uint32_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
          static_cast<char>(n)};
}

ToGuest ExecRequest(int64_t limit) {
  ToGuest r;
  r.mutable_exec()->add_argv("true");
  r.mutable_exec()->set_output_limit_bytes(limit);
  return r;
}

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

TEST(GuestChannelTest, AWellFormedAnswerIsReturned) {
  FakeGuest g([](int fd, const ToGuest& r) {
    FromGuest a;
    a.set_id(r.id());
    a.mutable_exec()->set_exit_code(3);
    a.mutable_exec()->set_stdout("out");
    Send(fd, a);
  });
  GuestChannel c(g.host_fd());
  absl::StatusOr<FromGuest> a = c.Call(ExecRequest(10), Soon());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->exec().exit_code(), 3);
  EXPECT_EQ(a->exec().stdout(), "out");
  EXPECT_TRUE(c.open());
}

TEST(GuestChannelTest, AnOversizedHeaderClosesTheChannelWithoutWaitingForItsBody) {
  FakeGuest g([](int fd, const ToGuest&) { SendRaw(fd, Header(1u << 30)); });
  GuestChannel c(g.host_fd());
  // The body never comes: the refusal is immediate, not the deadline's.
  absl::StatusOr<FromGuest> a = c.Call(ExecRequest(10), absl::InfiniteFuture());
  EXPECT_TRUE(absl::IsDataLoss(a.status())) << a.status();
  EXPECT_NE(a.status().message().find("above the"), std::string::npos) << a.status();
  EXPECT_FALSE(c.open());
  EXPECT_TRUE(absl::IsUnavailable(c.Call(ExecRequest(10), Soon()).status()));
}

TEST(GuestChannelTest, OutputBeyondTheLimitIsRefusedEvenInsideTheFrameBound) {
  FakeGuest g([](int fd, const ToGuest& r) {
    FromGuest a;
    a.set_id(r.id());
    a.mutable_exec()->set_stdout(std::string(11, 'x'));
    Send(fd, a);
  });
  GuestChannel c(g.host_fd());
  absl::StatusOr<FromGuest> a = c.Call(ExecRequest(10), Soon());
  EXPECT_TRUE(absl::IsDataLoss(a.status())) << a.status();
  EXPECT_FALSE(c.open());
}

TEST(GuestChannelTest, GarbageAnotherIdAndAnotherKindAreRefused) {
  struct Case {
    const char* name;
    std::function<void(int, const ToGuest&)> answer;
  };
  const Case cases[] = {
      {"garbage", [](int fd, const ToGuest&) { SendRaw(fd, Header(5) + "\xff\xff\xff\xff\xff"); }},
      {"another id",
       [](int fd, const ToGuest& r) {
         FromGuest a;
         a.set_id(r.id() + 1);
         a.mutable_exec();
         Send(fd, a);
       }},
      {"another kind",
       [](int fd, const ToGuest& r) {
         FromGuest a;
         a.set_id(r.id());
         a.mutable_done();
         Send(fd, a);
       }},
      {"an error without a code",
       [](int fd, const ToGuest& r) {
         FromGuest a;
         a.set_id(r.id());
         a.mutable_error();
         Send(fd, a);
       }},
      {"an error message that is not printable ASCII",
       [](int fd, const ToGuest& r) {
         FromGuest a;
         a.set_id(r.id());
         a.mutable_error()->set_code(guest::v1::ERROR_FAILED);
         a.mutable_error()->set_message("\x1b[2Jlog injection\n");
         Send(fd, a);
       }},
      {"a negative exit code",
       [](int fd, const ToGuest& r) {
         FromGuest a;
         a.set_id(r.id());
         a.mutable_exec()->set_exit_code(-1);
         Send(fd, a);
       }},
  };
  for (const Case& k : cases) {
    FakeGuest g(k.answer);
    GuestChannel c(g.host_fd());
    absl::StatusOr<FromGuest> a = c.Call(ExecRequest(10), Soon());
    EXPECT_TRUE(absl::IsDataLoss(a.status())) << k.name << ": " << a.status();
    EXPECT_FALSE(c.open()) << k.name;
  }
}

TEST(GuestChannelTest, AGuestThatNeverAnswersRunsIntoTheDeadline) {
  FakeGuest g([](int, const ToGuest&) {});
  GuestChannel c(g.host_fd());
  absl::StatusOr<FromGuest> a = c.Call(ExecRequest(10), absl::Now() + absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsDeadlineExceeded(a.status())) << a.status();
  EXPECT_FALSE(c.open());
}

TEST(GuestChannelTest, AGuestThatStopsReadingRunsIntoTheDeadlineOfTheWrite) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  GuestChannel c(sv[0]);  // nobody ever reads sv[1]
  ToGuest w;
  w.mutable_write_file()->set_path("/f");
  w.mutable_write_file()->set_content(std::string(size_t{16} << 20, 'x'));
  absl::StatusOr<FromGuest> a = c.Call(w, absl::Now() + absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(a.status())) << a.status();
  close(sv[1]);
}

TEST(GuestChannelTest, AGuestThatClosesItsEndIsUnavailable) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  GuestChannel c(sv[0]);
  close(sv[1]);
  EXPECT_TRUE(absl::IsUnavailable(c.Call(ExecRequest(10), Soon()).status()));
}

TEST(GuestChannelTest, ReadFileAnswersKeepTheSizeRules) {
  ToGuest r;
  r.set_id(7);
  r.mutable_read_file()->set_path("/f");
  r.mutable_read_file()->set_max_bytes(4);
  auto answer = [](const std::string& content, int64_t size, bool truncated) {
    FromGuest a;
    a.set_id(7);
    a.mutable_read_file()->set_content(content);
    a.mutable_read_file()->set_size(size);
    a.mutable_read_file()->set_truncated(truncated);
    return a.SerializeAsString();
  };
  EXPECT_TRUE(CheckAnswer(r, answer("abcd", 10, true)).ok());
  EXPECT_TRUE(CheckAnswer(r, answer("ab", 2, false)).ok());
  EXPECT_TRUE(absl::IsDataLoss(CheckAnswer(r, answer("abcde", 5, false)).status()));
  EXPECT_TRUE(absl::IsDataLoss(CheckAnswer(r, answer("abcd", 10, false)).status()));
  EXPECT_TRUE(absl::IsDataLoss(CheckAnswer(r, answer("abcd", 2, false)).status()));
  EXPECT_TRUE(absl::IsDataLoss(CheckAnswer(r, answer("ab", 2, true)).status()));
}

TEST(GuestChannelTest, FrameBoundsFollowTheRequest) {
  EXPECT_EQ(MaxAnswerBytes(ExecRequest(100)), 100 + kGuestEnvelopeBytes);
  EXPECT_EQ(MaxAnswerBytes(ExecRequest(int64_t{1} << 40)),
            size_t{33'554'432} + kGuestEnvelopeBytes);
  ToGuest sync;
  sync.mutable_sync();
  EXPECT_EQ(MaxAnswerBytes(sync), kGuestEnvelopeBytes);
}

// A guest slower than the host's Hello retry: the first Hello is answered after the second
// was sent. The handshake takes both answers in order and the next call gets its own answer,
// not a stale Ready.
TEST(GuestChannelTest, HandshakeConsumesLateAnswersToEarlierHellos) {
  std::atomic<int> hellos{0};
  FakeGuest g([&](int fd, const ToGuest& r) {
    FromGuest a;
    a.set_id(r.id());
    if (r.has_hello()) {
      if (++hellos == 1) usleep(600 * 1000);  // slower than the host's 250 ms retry
      a.mutable_ready()->set_nonce(r.hello().nonce());
      a.mutable_ready()->set_protocol_version(kGuestProtocolVersion);
      a.mutable_ready()->set_kernel_release("6.1.0-sandbox-node");
    } else {
      a.mutable_exec()->set_stdout("mine");
    }
    Send(fd, a);
  });
  GuestChannel c(g.host_fd());
  absl::StatusOr<guest::v1::Ready> ready = c.Handshake(Soon());
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_GE(hellos.load(), 2);
  EXPECT_EQ(ready->kernel_release(), "6.1.0-sandbox-node");
  absl::StatusOr<FromGuest> a = c.Call(ExecRequest(10), Soon());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->exec().stdout(), "mine");
}

// A guest whose port was not open for the first Hello (lost) answers the next one.
TEST(GuestChannelTest, HandshakeRepeatsAHelloThatWasLost) {
  std::atomic<int> hellos{0};
  FakeGuest g([&](int fd, const ToGuest& r) {
    if (++hellos == 1) return;  // lost
    FromGuest a;
    a.set_id(r.id());
    a.mutable_ready()->set_nonce(r.hello().nonce());
    a.mutable_ready()->set_protocol_version(kGuestProtocolVersion);
    Send(fd, a);
  });
  GuestChannel c(g.host_fd());
  EXPECT_TRUE(c.Handshake(Soon()).ok());
}

TEST(GuestChannelTest, HandshakeRefusesAnotherProtocolVersion) {
  FakeGuest g([](int fd, const ToGuest& r) {
    FromGuest a;
    a.set_id(r.id());
    a.mutable_ready()->set_nonce(r.hello().nonce());
    a.mutable_ready()->set_protocol_version(kGuestProtocolVersion + 1);
    Send(fd, a);
  });
  GuestChannel c(g.host_fd());
  EXPECT_TRUE(absl::IsDataLoss(c.Handshake(Soon()).status()));
}

TEST(GuestChannelTest, HandshakeOfASilentGuestEndsAtTheDeadline) {
  FakeGuest g([](int, const ToGuest&) {});
  GuestChannel c(g.host_fd());
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      c.Handshake(absl::Now() + absl::Milliseconds(600)).status()));
}

}  // namespace
}  // namespace sn::microvm

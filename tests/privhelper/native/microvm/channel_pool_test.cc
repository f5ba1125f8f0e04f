// The native helper's kept guest channels (privhelper/native/microvm/channel_pool.h), with
// socketpairs for guests: a kept channel is used again only while quiet; one exchange at a time
// per VM; Forget closes; the pool keeps at most kMaxKept.
#include "privhelper/native/microvm/channel_pool.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "privhelper/native/microvm/guest_channel.h"

namespace sn::microvm {
namespace {

constexpr char kVm[] = "0000aaaa-0000-4000-8000-000000000001";
constexpr char kOtherVm[] = "0000aaaa-0000-4000-8000-000000000002";

// Connections the pool asked for; the guest's end of each.
class Guests {
 public:
  ~Guests() {
    for (int fd : guest_ends_) close(fd);
  }
  GuestChannelPool::ConnectFn Connect() {
    return [this](absl::Time) -> absl::StatusOr<std::unique_ptr<GuestChannel>> {
      ++connects_;
      if (refuse_) return absl::UnavailableError("the VM does not answer");
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        return absl::InternalError("socketpair");
      }
      guest_ends_.push_back(sv[1]);
      return std::make_unique<GuestChannel>(sv[0]);
    };
  }
  // The guest end of the newest connection.
  int last() const { return guest_ends_.back(); }
  int connects() const { return connects_; }
  void refuse(bool r) { refuse_ = r; }

 private:
  std::vector<int> guest_ends_;
  int connects_ = 0;
  bool refuse_ = false;
};

// True when the host closed the connection whose guest end is `fd` (a reset when it closed
// with the guest's bytes unread).
bool HostClosed(int fd) {
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

absl::Time Later() { return absl::Now() + absl::Seconds(60); }

TEST(GuestChannelPoolTest, AQuietChannelIsKeptAndUsedAgain) {
  GuestChannelPool pool;
  Guests guests;
  {
    auto lease = pool.Acquire(kVm, Later(), guests.Connect());
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_FALSE(lease->reused());
  }
  EXPECT_EQ(pool.kept(), 1u);
  auto again = pool.Acquire(kVm, Later(), guests.Connect());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->reused());
  EXPECT_EQ(guests.connects(), 1);
  EXPECT_FALSE(HostClosed(guests.last()));
}

TEST(GuestChannelPoolTest, AGuestThatWroteBetweenCallsGetsANewConnection) {
  GuestChannelPool pool;
  Guests guests;
  { ASSERT_TRUE(pool.Acquire(kVm, Later(), guests.Connect()).ok()); }
  const int first = guests.last();
  ASSERT_EQ(write(first, "x", 1), 1);  // unsolicited: never read as the next answer
  auto lease = pool.Acquire(kVm, Later(), guests.Connect());
  ASSERT_TRUE(lease.ok());
  EXPECT_FALSE(lease->reused());
  EXPECT_EQ(guests.connects(), 2);
  EXPECT_TRUE(HostClosed(first));
}

TEST(GuestChannelPoolTest, AChannelWhoseVmHungUpIsNotUsedAgain) {
  GuestChannelPool pool;
  Guests guests;
  { ASSERT_TRUE(pool.Acquire(kVm, Later(), guests.Connect()).ok()); }
  shutdown(guests.last(), SHUT_RDWR);  // qemu exited, or the VM was booted again
  auto lease = pool.Acquire(kVm, Later(), guests.Connect());
  ASSERT_TRUE(lease.ok());
  EXPECT_FALSE(lease->reused());
  EXPECT_EQ(guests.connects(), 2);
}

TEST(GuestChannelPoolTest, OneExchangeAtATimePerVmTheNextWaitsForTheChannel) {
  GuestChannelPool pool;
  Guests guests;
  auto held = pool.Acquire(kVm, Later(), guests.Connect());
  ASSERT_TRUE(held.ok());
  // Another VM is not held up.
  EXPECT_TRUE(pool.Acquire(kOtherVm, Later(), guests.Connect()).ok());
  // The same VM: nothing at the deadline, and no second connection (qemu serves one client).
  auto late = pool.Acquire(kVm, absl::Now(), guests.Connect());
  EXPECT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  EXPECT_EQ(guests.connects(), 2);
  // A waiter gets the channel once the holder gives it back.
  bool reused = false;
  std::thread waiter([&] {
    auto next = pool.Acquire(kVm, Later(), guests.Connect());
    reused = next.ok() && next->reused();
  });
  { auto release = std::move(*held); }
  waiter.join();
  EXPECT_TRUE(reused);
  EXPECT_EQ(guests.connects(), 2);
}

TEST(GuestChannelPoolTest, ForgetClosesTheKeptChannelAndOneInUseWhenGivenBack) {
  GuestChannelPool pool;
  Guests guests;
  { ASSERT_TRUE(pool.Acquire(kVm, Later(), guests.Connect()).ok()); }
  const int idle = guests.last();
  pool.Forget(kVm);
  EXPECT_TRUE(HostClosed(idle));
  EXPECT_EQ(pool.kept(), 0u);

  {
    auto busy = pool.Acquire(kVm, Later(), guests.Connect());
    ASSERT_TRUE(busy.ok());
    pool.Forget(kVm);  // a stop while an exchange runs
    EXPECT_FALSE(HostClosed(guests.last()));
  }
  EXPECT_TRUE(HostClosed(guests.last()));
  EXPECT_EQ(pool.kept(), 0u);
  // Forgotten once: the next exchange's channel is kept again.
  { ASSERT_TRUE(pool.Acquire(kVm, Later(), guests.Connect()).ok()); }
  EXPECT_EQ(pool.kept(), 1u);
}

TEST(GuestChannelPoolTest, AFailedConnectionLeavesTheVmFreeForTheNextExchange) {
  GuestChannelPool pool;
  Guests guests;
  guests.refuse(true);
  auto refused = pool.Acquire(kVm, Later(), guests.Connect());
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  guests.refuse(false);
  auto lease = pool.Acquire(kVm, absl::Now(), guests.Connect());  // not busy: no wait
  EXPECT_TRUE(lease.ok()) << lease.status();
}

TEST(GuestChannelPoolTest, AtMostKMaxKeptChannelsAreKept) {
  GuestChannelPool pool;
  Guests guests;
  for (size_t i = 0; i <= GuestChannelPool::kMaxKept; ++i) {
    auto lease = pool.Acquire(absl::StrCat("vm-", i), Later(), guests.Connect());
    ASSERT_TRUE(lease.ok());
  }
  EXPECT_EQ(pool.kept(), GuestChannelPool::kMaxKept);
  EXPECT_TRUE(HostClosed(guests.last()));  // the one over the bound: closed after its exchange
}

}  // namespace
}  // namespace sn::microvm

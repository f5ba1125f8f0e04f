// docs/reliability.md finding 6, attacked against the real privhelper executable and the host's
// dockerd: a native helper that dies with its Engine API create already sent leaves a request
// that dockerd carries out later, whatever became of its client. Between the two, a kill or an
// inspect of that sandbox must not answer `not_found` / `absent` from an inventory the late
// create is about to change (the container would outlive Core's kill). The sandbox fence
// (privhelper/rpc/sandbox_fence.h, docs/protocol.md 22e) answers them `unavailable` until the
// create can no longer act or is seen to have landed, across a restart of privhelper too.
//
// "Later" is made exact by a proxy on privhelper's docker_socket: it forwards every request to
// the host's dockerd, but holds a container create until the test releases it, as a daemon
// that has received a request and not yet carried it out.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/privhelper/audit/audit_fixture.h"
#include "tests/privhelper/audit/audit_test_base.h"

namespace sn::testing {
namespace {

int Connect(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The proxy. Each client connection gets its own upstream connection and two pumps; a chunk
// from the client that starts a container create is held (with everything after it on that
// connection) until Release(); then it goes to dockerd even if its client is gone, and the
// status line dockerd answers it with is kept.
class HoldingDockerProxy {
 public:
  explicit HoldingDockerProxy(std::string path) : path_(std::move(path)) {
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path_.c_str(), sizeof a.sun_path - 1);
    unlink(path_.c_str());
    ok_ = listen_fd_ >= 0 && bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
          listen(listen_fd_, 64) == 0;
    if (ok_) accept_ = std::thread([this] { AcceptLoop(); });
  }
  ~HoldingDockerProxy() {
    Release();
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    {
      absl::MutexLock l(&mu_);
      stopping_ = true;
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    }
    if (accept_.joinable()) accept_.join();
    for (std::thread& t : pumps_) t.join();
    for (int fd : fds_) close(fd);
  }
  bool ok() const { return ok_; }

  void HoldCreates() {
    absl::MutexLock l(&mu_);
    hold_ = true;
  }
  // Blocks until a create is held (true) or `timeout` passes.
  bool AwaitHeld(absl::Duration timeout) {
    absl::MutexLock l(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(
                                    +[](int* n) { return *n > 0; }, &held_), timeout);
  }
  // Lets the held creates through (and stops holding).
  void Release() {
    absl::MutexLock l(&mu_);
    hold_ = false;
    released_ = true;
  }
  // Blocks until dockerd answered a released create; its status line, "" on timeout.
  std::string AwaitCreateAnswer(absl::Duration timeout) {
    absl::MutexLock l(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](std::string* s) { return !s->empty(); }, &create_answer_),
                         timeout);
    return create_answer_;
  }

 private:
  void AcceptLoop() {
    for (;;) {
      int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      int u = Connect(kHostDockerSocket);
      absl::MutexLock l(&mu_);
      if (stopping_ || u < 0) {
        close(c);
        if (u >= 0) close(u);
        if (stopping_) return;
        continue;
      }
      fds_.push_back(c);
      fds_.push_back(u);
      auto watch = std::make_shared<bool>(false);  // this connection's create was released
      pumps_.emplace_back([this, c, u, watch] { ClientToDaemon(c, u, watch); });
      pumps_.emplace_back([this, c, u, watch] { DaemonToClient(u, c, watch); });
    }
  }

  void ClientToDaemon(int c, int u, std::shared_ptr<bool> watch) {
    char buf[65536];
    for (;;) {
      ssize_t n = read(c, buf, sizeof buf);
      if (n <= 0) {
        shutdown(u, SHUT_WR);
        return;
      }
      const std::string_view chunk(buf, static_cast<size_t>(n));
      if (chunk.rfind("POST ", 0) == 0 && chunk.find("/containers/create") != std::string::npos) {
        absl::MutexLock l(&mu_);
        if (hold_) {
          ++held_;
          mu_.Await(absl::Condition(+[](bool* r) { return *r; }, &released_));
          *watch = true;
        }
      }
      if (!WriteAll(u, buf, static_cast<size_t>(n))) return;
    }
  }

  void DaemonToClient(int u, int c, std::shared_ptr<bool> watch) {
    char buf[65536];
    bool client_gone = false;
    for (;;) {
      ssize_t n = read(u, buf, sizeof buf);
      if (n <= 0) {
        shutdown(c, SHUT_WR);
        return;
      }
      {
        absl::MutexLock l(&mu_);
        if (*watch && create_answer_.empty()) {
          const std::string_view s(buf, static_cast<size_t>(n));
          create_answer_ = std::string(s.substr(0, s.find("\r\n")));
        }
      }
      if (!client_gone && !WriteAll(c, buf, static_cast<size_t>(n))) client_gone = true;
    }
  }

  const std::string path_;
  int listen_fd_ = -1;
  bool ok_ = false;
  std::thread accept_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  std::string create_answer_ ABSL_GUARDED_BY(mu_);
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> pumps_;  // joined after accept_ (only AcceptLoop adds)
};

class FenceAuditTest : public RegisteredPrivhelperTest {
 protected:
  // privhelper registered behind the proxy; false when the test cannot go on (skipped loudly
  // without dockerd, or a failed start).
  bool StartBehindProxy(int64_t max_active = PrivhelperProcess::Options().max_active) {
    Start(max_active);
    return !HasFatalFailure() && !IsSkipped();
  }
  void Start(int64_t max_active) {
    SN_REQUIRE_DOCKERD();
    proxy_ = std::make_unique<HoldingDockerProxy>(dir_.File("docker.sock"));
    ASSERT_TRUE(proxy_->ok());
    PrivhelperProcess::Options o;
    o.docker_socket = dir_.File("docker.sock");
    o.max_active = max_active;
    StartRegistered(o);
  }
  // A create of `sb` whose Engine API request dockerd has received but not carried out: the
  // call runs on its own thread (joined by the caller) until the test ends it.
  std::thread CreateHeld(const std::string& sb, CallResult* out) {
    proxy_->HoldCreates();
    std::thread t([this, sb, out] { *out = Execute(Request(Create(sb), 1, 30000)); });
    EXPECT_TRUE(proxy_->AwaitHeld(absl::Seconds(60))) << ph_->Log();
    return t;
  }
  std::string Kill(const std::string& sb) {
    CallResult r = Execute(Request(absl::StrCat("kill { sandbox_id: \"", sb, "\" }")));
    return r.error_code + " " + r.refusal;
  }
  std::string Inspect(const std::string& sb) {
    CallResult r = Execute(Request(absl::StrCat("inspect { sandbox_id: \"", sb, "\" }")));
    return r.error_code + " " + r.refusal;
  }
  // dockerd carries the held create out; the container now exists (what a `not_found` before
  // would have left behind, unknown to Core).
  void DaemonCarriesOutTheCreate() {
    proxy_->Release();
    EXPECT_EQ(proxy_->AwaitCreateAnswer(absl::Seconds(120)), "HTTP/1.1 201 Created");
    EXPECT_EQ(Containers(), 1u);
  }

  ShortTempDir dir_;
  std::unique_ptr<HoldingDockerProxy> proxy_;
};

// An absence that is not proof: the helper answered not_found / absent, privhelper says
// unavailable (nothing was mutated).
constexpr char kFenced[] = "ERROR_CODE_UNAVAILABLE REFUSAL_NONE";

TEST_F(FenceAuditTest, AKillWhileADeadHelpersCreateMayLandIsUnavailableNotNotFound) {
  if (!StartBehindProxy()) return;
  const std::string sb = RandomUuid();
  CallResult create;
  std::thread t = CreateHeld(sb, &create);
  // The native helper dies with its create sent (the soak's kill_native_helper).
  std::vector<pid_t> helpers = ChildrenOf(ph_->pid());
  ASSERT_FALSE(helpers.empty());
  for (pid_t p : helpers) kill(p, SIGKILL);
  t.join();
  EXPECT_EQ(create.error_code, "ERROR_CODE_UNCERTAIN") << ph_->Log();
  // Before the fence: kill answered ERROR_CODE_NOT_FOUND and inspect SANDBOX_STATE_ABSENT here.
  EXPECT_EQ(Kill(sb), kFenced) << ph_->Log();
  EXPECT_EQ(Inspect(sb), kFenced);
  // A second create of the sandbox meanwhile is refused: the first may still land.
  EXPECT_EQ(Execute(Request(Create(sb))).refusal, "REFUSAL_SANDBOX_BUSY");
  DaemonCarriesOutTheCreate();
  // Once an answer shows the sandbox, the fence ends: Core's kill finds and removes it.
  EXPECT_EQ(Inspect(sb), "ERROR_CODE_NONE REFUSAL_NONE");
  EXPECT_EQ(Kill(sb), "ERROR_CODE_NONE REFUSAL_NONE");
  EXPECT_EQ(Kill(sb), "ERROR_CODE_NOT_FOUND REFUSAL_NONE");
  EXPECT_EQ(Containers(), 0u);
  EXPECT_TRUE(ph_->Alive());
}

TEST_F(FenceAuditTest, TheFenceOutlivesAPrivhelperKilledWithTheCreateInFlight) {
  if (!StartBehindProxy()) return;
  const std::string sb = RandomUuid();
  CallResult create;
  std::thread t = CreateHeld(sb, &create);
  ph_->Kill();  // kill -9 of privhelper; its helper's request stays with the daemon
  t.join();
  EXPECT_NE(create.status, 0) << "the call died with privhelper";
  ASSERT_TRUE(ph_->Restart()) << ph_->Log();
  // Before the fence: the new privhelper's kill answered ERROR_CODE_NOT_FOUND.
  EXPECT_EQ(Kill(sb), kFenced) << ph_->Log();
  DaemonCarriesOutTheCreate();
  EXPECT_EQ(Kill(sb), "ERROR_CODE_NONE REFUSAL_NONE");
  EXPECT_EQ(Containers(), 0u);
  EXPECT_EQ(Kill(sb), "ERROR_CODE_NOT_FOUND REFUSAL_NONE");
  EXPECT_TRUE(ph_->Alive());
}

// max_active while a create may still land: its capacity slot is held as long as its sandbox is
// fenced, so a create of another sandbox meanwhile is `capacity`, never a second container
// beyond max_active 1 when the first lands. As the agent's uid alone: the first create's budget
// ends while the daemon holds it (a slow daemon), which the agent can always arrange.
TEST_F(FenceAuditTest, ACreateThatMayStillLandKeepsItsCapacitySlot) {
  if (!StartBehindProxy(/*max_active=*/1)) return;
  const std::string first = RandomUuid();
  proxy_->HoldCreates();
  const CallResult create = Execute(Request(Create(first), 1, 2000));
  EXPECT_EQ(create.error_code, "ERROR_CODE_UNCERTAIN") << ph_->Log();
  ASSERT_TRUE(proxy_->AwaitHeld(absl::Seconds(60)));
  // Before: the slot went with the call, the helper counted no container and no call in
  // flight, and this create was admitted (held by the daemon too, then both landed: 2 running).
  const CallResult second = Execute(Request(Create(RandomUuid()), 1, 2000));
  EXPECT_EQ(second.error_code, "ERROR_CODE_CAPACITY") << second.response << ph_->Log();
  DaemonCarriesOutTheCreate();
  EXPECT_EQ(Containers(), 1u);
  EXPECT_EQ(Kill(first), "ERROR_CODE_NONE REFUSAL_NONE");
  EXPECT_EQ(Containers(), 0u);
  EXPECT_TRUE(ph_->Alive());
}

// A mutation whose helper answered releases its sandbox at once: no fence in the normal path.
TEST_F(FenceAuditTest, AnAnsweredMutationLeavesNothingFenced) {
  if (!StartBehindProxy()) return;
  const std::string sb = RandomUuid();
  ASSERT_EQ(Execute(Request(Create(sb))).error_code, "ERROR_CODE_NONE") << ph_->Log();
  EXPECT_EQ(Kill(sb), "ERROR_CODE_NONE REFUSAL_NONE");
  EXPECT_EQ(Kill(sb), "ERROR_CODE_NOT_FOUND REFUSAL_NONE");
  EXPECT_EQ(Containers(), 0u);
}

}  // namespace
}  // namespace sn::testing

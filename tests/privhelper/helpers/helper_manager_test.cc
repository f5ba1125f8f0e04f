// HelperManager with the real native_helper (and a misbehaving fake) started through the real
// sandboxed spawn path: what a running helper holds (privileges, descriptors, environment,
// limits), the protocol-version and sandbox checks, and idle retirement on a simulated clock.
// No dockerd is needed: every call here is one the helper refuses before any native I/O.
// Needs root (the spawn path locks securebits); skips loudly otherwise, fails under CI=true.
#include "privhelper/helpers/helper_manager.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/wire/limits.h"
#include "gtest/gtest.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;

constexpr char kInstallation[] = "0000aaaa-0000-4000-8000-00000000000f";
constexpr char kSandbox[] = "0000bbbb-0000-4000-8000-000000000002";
constexpr absl::Duration kIdle = absl::Seconds(600);

std::string Runfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  return (srcdir && ws) ? std::string(srcdir) + "/" + ws + "/" + rel : rel;
}

std::string ReadProc(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::set<int> OpenFds(pid_t pid) {
  std::set<int> fds;
  std::string dir = absl::StrCat("/proc/", pid, "/fd");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return fds;
  while (dirent* e = readdir(d)) {
    int fd;
    if (absl::SimpleAtoi(e->d_name, &fd)) fds.insert(fd);
  }
  closedir(d);
  return fds;
}

std::string Link(const std::string& path) {
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

bool CloseOnExec(pid_t pid, int fd) {
  const std::string fdinfo = ReadProc(absl::StrCat("/proc/", pid, "/fdinfo/", fd));
  const size_t at = fdinfo.find("flags:\t");
  return at != std::string::npos && (std::stoul(fdinfo.substr(at + 7), nullptr, 8) & O_CLOEXEC);
}

// The helper's descriptors besides the epoll sets it makes itself (one per thread that waits
// for calls, privhelper/native/native_helper_main.cc), which must be close-on-exec and hold
// nothing it was given. At least the main thread's is there.
std::set<int> FdsBesidesOwnEpollSets(pid_t pid) {
  std::set<int> fds;
  int epolls = 0;
  for (int fd : OpenFds(pid)) {
    if (Link(absl::StrCat("/proc/", pid, "/fd/", fd)) == "anon_inode:[eventpoll]") {
      EXPECT_TRUE(CloseOnExec(pid, fd)) << fd;
      ++epolls;
    } else {
      fds.insert(fd);
    }
  }
  EXPECT_GE(epolls, 1);
  return fds;
}

// "Max open files   1024   1024   files" -> "1024 1024"
std::string LimitLine(const std::string& limits, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(limits, '\n')) {
    if (!absl::StartsWith(line, name)) continue;
    std::vector<absl::string_view> f =
        absl::StrSplit(line.substr(name.size()), ' ', absl::SkipWhitespace());
    if (f.size() >= 2) return absl::StrCat(f[0], " ", f[1]);
  }
  return "";
}

// A call the helper answers `invalid` without native I/O (finding 3's bound).
pb::ExecuteRequest RefusedCall(int64_t generation = 1) {
  pb::ExecuteRequest r;
  r.set_request_id("0000cccc-0000-4000-8000-000000000003");
  r.set_generation(generation);
  r.set_budget_ms(5000);
  r.mutable_exec()->set_sandbox_id(kSandbox);
  r.mutable_exec()->add_argv("true");
  r.mutable_exec()->set_output_limit_bytes(wire::kMaxOutputLimitBytes + 1);
  return r;
}

class HelperManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { SN_REQUIRE_ROOT(); }

  std::unique_ptr<HelperManager> Make(const std::string& helper = "privhelper/native/native_helper",
                                      int max_helpers = 8) {
    HelperOptions o;
    o.helper_path = Runfile(helper);
    o.installation_id = kInstallation;
    o.provider_flags = {"--docker_socket=/nonexistent/docker.sock"};  // never reached
    o.max_helpers = max_helpers;
    o.idle_timeout = kIdle;
    o.clock = &clock_;
    o.idle_reaper_thread = false;
    o.open_lease = open_lease_;
    return std::make_unique<HelperManager>(o);
  }

  static absl::StatusOr<pb::ExecuteResponse> Call(HelperManager& m, int64_t generation = 1) {
    return m.Execute(RefusedCall(generation), ResolvedCall{}, [] { return false; });
  }

  static void ExpectRefusedByTheHelper(const absl::StatusOr<pb::ExecuteResponse>& r) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->error_code(), pb::ERROR_CODE_INVALID);
    EXPECT_FALSE(r->native_call_started());
  }

  SimulatedClock clock_;
  std::function<absl::StatusOr<int>(int64_t)> open_lease_;
};

TEST_F(HelperManagerTest, RunningHelperHasNoPrivilegeOnlyItsDescriptorsNoEnvironmentAndItsLimits) {
  auto m = Make();
  ExpectRefusedByTheHelper(Call(*m));
  const pid_t pid = m->helper_pid(1);
  ASSERT_GT(pid, 0);
  const std::string proc = absl::StrCat("/proc/", pid);

  const std::string status = ReadProc(proc + "/status");
  EXPECT_TRUE(CheckSandboxedStatus(status, 2).ok()) << status;
  EXPECT_NE(status.find("NoNewPrivs:\t1\n"), std::string::npos);
  EXPECT_NE(status.find("Seccomp:\t2\n"), std::string::npos);
  EXPECT_NE(status.find("Seccomp_filters:\t2\n"), std::string::npos) << status;
  for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_NE(status.find(absl::StrCat(cap, ":\t0000000000000000\n")), std::string::npos) << cap;
  }

  EXPECT_EQ(FdsBesidesOwnEpollSets(pid), (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(Link(proc + "/fd/0"), "/dev/null");
  EXPECT_EQ(Link(proc + "/fd/1"), "/dev/null");
  EXPECT_EQ(Link(proc + "/fd/2"), Link("/proc/self/fd/2"));  // privhelper's stderr: the logs
  EXPECT_EQ(ReadProc(proc + "/environ"), "");

  const std::string limits = ReadProc(proc + "/limits");
  const SandboxLimits want;
  EXPECT_EQ(LimitLine(limits, "Max open files"), absl::StrCat(want.open_files, " ", want.open_files));
  EXPECT_EQ(LimitLine(limits, "Max core file size"), "0 0");
  const std::string as = want.address_space_bytes == RLIM_INFINITY
                             ? "unlimited"
                             : absl::StrCat(want.address_space_bytes);
  EXPECT_EQ(LimitLine(limits, "Max address space"), absl::StrCat(as, " ", as));
  EXPECT_EQ(LimitLine(limits, "Max stack size"),
            absl::StrCat(want.stack_bytes, " ", want.stack_bytes));
}

// Calls waiting on one helper read its socket in turns and hand each other's results to the
// right caller: an inspect (native I/O, which fails: no daemon) and a refused exec, interleaved
// from many threads, each get their own kind of answer.
TEST_F(HelperManagerTest, ConcurrentCallsOnOneHelperEachGetTheirOwnResult) {
  auto m = Make();
  pb::ExecuteRequest inspect;
  inspect.set_request_id("0000cccc-0000-4000-8000-000000000004");
  inspect.set_generation(1);
  inspect.set_budget_ms(20000);
  inspect.mutable_inspect()->set_sandbox_id(kSandbox);
  absl::StatusOr<pb::ExecuteResponse> first =
      m->Execute(inspect, ResolvedCall{}, [] { return false; });
  ASSERT_TRUE(first.ok()) << first.status();
  const pb::ErrorCode inspect_code = first->error_code();
  ASSERT_NE(inspect_code, pb::ERROR_CODE_INVALID);
  constexpr int kThreads = 8;
  constexpr int kCalls = 25;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const bool refused = (t + i) % 2 == 0;
        absl::StatusOr<pb::ExecuteResponse> r =
            m->Execute(refused ? RefusedCall() : inspect, ResolvedCall{}, [] { return false; });
        if (!r.ok() ||
            r->error_code() != (refused ? pb::ERROR_CODE_INVALID : inspect_code)) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(m->live_helpers(), 1);
}

TEST_F(HelperManagerTest, LeaseIsFdFourCloseOnExecAndPrivhelperClosesItOnlyAfterTheReap) {
  sn::testing::ShortTempDir dir;
  const std::string lease_path = dir.File("1.lease");
  ASSERT_TRUE(std::ofstream(lease_path).good());
  open_lease_ = [&](int64_t) -> absl::StatusOr<int> {
    return open(lease_path.c_str(), O_RDONLY | O_CLOEXEC);
  };
  auto privhelper_copies = [&] {
    int n = 0;
    for (int fd : OpenFds(getpid())) n += Link(absl::StrCat("/proc/self/fd/", fd)) == lease_path;
    return n;
  };
  auto m = Make();
  ExpectRefusedByTheHelper(Call(*m));
  const pid_t pid = m->helper_pid(1);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(FdsBesidesOwnEpollSets(pid), (std::set<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Link(absl::StrCat("/proc/", pid, "/fd/4")), lease_path);
  // The helper set it close-on-exec before any provider call: "flags: 02100000" (O_CLOEXEC).
  const std::string fdinfo = ReadProc(absl::StrCat("/proc/", pid, "/fdinfo/4"));
  const size_t at = fdinfo.find("flags:\t");
  ASSERT_NE(at, std::string::npos) << fdinfo;
  unsigned long flags = std::stoul(fdinfo.substr(at + 7), nullptr, 8);
  EXPECT_NE(flags & O_CLOEXEC, 0u) << fdinfo;
  EXPECT_EQ(privhelper_copies(), 1);

  clock_.Advance(kIdle + absl::Seconds(1));
  EXPECT_EQ(m->ReapIdle(), 1);
  ASSERT_TRUE(m->WaitUntilNoLiveHelpers(absl::Seconds(30)));
  EXPECT_EQ(privhelper_copies(), 0);
}

TEST_F(HelperManagerTest, IdleHelperIsStoppedOnlyAfterTheIdleTimeAndReaped) {
  auto m = Make();
  ExpectRefusedByTheHelper(Call(*m));
  const pid_t pid = m->helper_pid(1);
  ASSERT_GT(pid, 0);
  clock_.Advance(kIdle - absl::Seconds(1));
  EXPECT_EQ(m->ReapIdle(), 0);
  ExpectRefusedByTheHelper(Call(*m));  // a call resets the idle time
  clock_.Advance(kIdle - absl::Seconds(1));
  EXPECT_EQ(m->ReapIdle(), 0);
  EXPECT_EQ(m->helper_pid(1), pid);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(m->ReapIdle(), 1);
  EXPECT_EQ(m->helper_pid(1), 0);
  ASSERT_TRUE(m->WaitUntilNoLiveHelpers(absl::Seconds(30)));
  EXPECT_NE(kill(pid, 0), 0);  // reaped: no such process
  ExpectRefusedByTheHelper(Call(*m));  // the next call starts a new helper
  EXPECT_NE(m->helper_pid(1), 0);
  EXPECT_NE(m->helper_pid(1), pid);
}

TEST_F(HelperManagerTest, HelperWithACallInFlightIsNeverIdle) {
  auto m = Make();
  ExpectRefusedByTheHelper(Call(*m));
  const pid_t pid = m->helper_pid(1);
  ASSERT_GT(pid, 0);  // never kill(0, ...): that would stop the test's own process group
  ASSERT_EQ(kill(pid, SIGSTOP), 0);  // the next call stays in flight until SIGCONT
  absl::StatusOr<pb::ExecuteResponse> r;
  std::thread caller([&] { r = Call(*m); });
  ASSERT_TRUE(m->WaitForCallsInFlight(1, 1, absl::Seconds(30)));
  clock_.Advance(kIdle * 2);
  EXPECT_EQ(m->ReapIdle(), 0);
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  caller.join();
  ExpectRefusedByTheHelper(r);
  EXPECT_EQ(m->helper_pid(1), pid);
}

TEST_F(HelperManagerTest, CallArrivingWhileAHelperRetiresStartsANewHelper) {
  auto m = Make();
  ExpectRefusedByTheHelper(Call(*m));
  const pid_t retiring = m->helper_pid(1);
  ASSERT_GT(retiring, 0);  // never kill(0, ...): that would stop the test's own process group
  ASSERT_EQ(kill(retiring, SIGSTOP), 0);  // cannot see its EOF and exit: stays retiring
  clock_.Advance(kIdle + absl::Seconds(1));
  EXPECT_EQ(m->ReapIdle(), 1);
  EXPECT_EQ(m->helper_pid(1), 0);
  EXPECT_EQ(m->live_helpers(), 1);  // counted until reaped
  // Answered at once: a call written to the stopped helper would wait for its budget.
  ExpectRefusedByTheHelper(Call(*m));
  const pid_t fresh = m->helper_pid(1);
  EXPECT_NE(fresh, 0);
  EXPECT_NE(fresh, retiring);
  EXPECT_EQ(m->live_helpers(), 2);
  ASSERT_EQ(kill(retiring, SIGCONT), 0);
  clock_.Advance(kIdle + absl::Seconds(1));
  EXPECT_EQ(m->ReapIdle(), 1);
  ASSERT_TRUE(m->WaitUntilNoLiveHelpers(absl::Seconds(30)));
  EXPECT_NE(kill(retiring, 0), 0);
  EXPECT_NE(kill(fresh, 0), 0);
}

TEST_F(HelperManagerTest, LiveHelperBoundCountsARetiringHelper) {
  auto m = Make("privhelper/native/native_helper", /*max_helpers=*/1);
  ExpectRefusedByTheHelper(Call(*m));
  const pid_t retiring = m->helper_pid(1);
  ASSERT_GT(retiring, 0);  // never kill(0, ...): that would stop the test's own process group
  ASSERT_EQ(kill(retiring, SIGSTOP), 0);
  clock_.Advance(kIdle + absl::Seconds(1));
  EXPECT_EQ(m->ReapIdle(), 1);
  absl::StatusOr<pb::ExecuteResponse> refused = Call(*m);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_EQ(GetHelperFailure(refused.status()), HelperFailure::kTooManyHelpers);
  ASSERT_EQ(kill(retiring, SIGCONT), 0);
  ASSERT_TRUE(m->WaitUntilNoLiveHelpers(absl::Seconds(30)));
  ExpectRefusedByTheHelper(Call(*m));
}

TEST_F(HelperManagerTest, HelperSpeakingAnotherProtocolVersionIsRefusedKilledAndReaped) {
  auto m = Make("tests/privhelper/helpers/fake_helper");
  absl::StatusOr<pb::ExecuteResponse> r = Call(*m, /*generation=*/7);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();  // configuration_invalid
  EXPECT_EQ(GetHelperFailure(r.status()), HelperFailure::kProtocolMismatch);
  EXPECT_EQ(m->live_helpers(), 0);  // killed and reaped before Execute returned
  EXPECT_EQ(m->helper_pid(7), 0);
}

TEST_F(HelperManagerTest, HelperAnnouncingAnotherGenerationOrNothingIsRefused) {
  auto m = Make("tests/privhelper/helpers/fake_helper");
  absl::StatusOr<pb::ExecuteResponse> wrong = Call(*m, /*generation=*/8);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(GetHelperFailure(wrong.status()), HelperFailure::kStartFailed) << wrong.status();
  EXPECT_TRUE(absl::IsUnavailable(wrong.status()));
  EXPECT_EQ(m->live_helpers(), 0);

  HelperOptions o;
  o.helper_path = Runfile("tests/privhelper/helpers/fake_helper");
  o.installation_id = kInstallation;
  o.start_timeout = absl::Milliseconds(300);
  o.idle_reaper_thread = false;
  HelperManager silent_manager(o);
  absl::StatusOr<pb::ExecuteResponse> silent = Call(silent_manager, /*generation=*/9);
  ASSERT_FALSE(silent.ok());
  EXPECT_EQ(GetHelperFailure(silent.status()), HelperFailure::kStartFailed) << silent.status();
  EXPECT_EQ(silent_manager.live_helpers(), 0);
}

// A helper that stops writing halfway through a frame, or writes one that does not parse,
// while staying alive: the call fails (the helper counts as exited during the call) instead
// of waiting forever, and the helper is killed and reaped, not waited for.
TEST_F(HelperManagerTest, HelperStallingMidFrameOrBreakingTheFramingIsKilledAndTheCallFails) {
  for (int64_t generation : {10, 11}) {
    SCOPED_TRACE(generation);
    HelperOptions o;
    o.helper_path = Runfile("tests/privhelper/helpers/fake_helper");
    o.installation_id = kInstallation;
    o.idle_reaper_thread = false;
    o.frame_read_timeout = absl::Milliseconds(200);
    HelperManager m(o);
    absl::StatusOr<pb::ExecuteResponse> r = Call(m, generation);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsAborted(r.status())) << r.status();
    EXPECT_TRUE(m.WaitUntilNoLiveHelpers(absl::Seconds(30)));
    EXPECT_EQ(m.helper_pid(generation), 0);
  }
}

// A create for the fake helper's VmRequest behaviours (fake_helper.cc, generations 12-17).
pb::ExecuteRequest CreateCall(int64_t generation) {
  pb::ExecuteRequest r;
  r.set_request_id("0000cccc-0000-4000-8000-000000000004");
  r.set_generation(generation);
  r.set_budget_ms(20000);
  r.mutable_create()->set_sandbox_id(kSandbox);
  r.mutable_create()->set_image("base");
  return r;
}

HelperOptions VmFakeOptions() {
  HelperOptions o;
  o.helper_path = Runfile("tests/privhelper/helpers/fake_helper");
  o.installation_id = kInstallation;
  o.idle_reaper_thread = false;
  return o;
}

// The microVM provider's frames: a VmRequest the permit table allows (boot of the create's own
// sandbox) runs once, through vm_actions, with what privhelper resolved for the call, and the
// helper gets its answer before it answers the call.
TEST_F(HelperManagerTest, AVmRequestThePermitTableAllowsRunsOnceWithPrivhelpersResolution) {
  std::atomic<int> actions{0};
  HelperOptions o = VmFakeOptions();
  o.vm_actions = [&actions](const pb::ExecuteRequest& req, const ResolvedCall& resolved,
                            const pb::VmRequest& vm) {
    ++actions;
    EXPECT_TRUE(vm.has_boot());
    EXPECT_EQ(vm.sandbox_id(), kSandbox);
    EXPECT_EQ(req.create().sandbox_id(), kSandbox);
    EXPECT_EQ(resolved.native_image, "/store/images/sha256-x.img");
    return absl::OkStatus();
  };
  HelperManager m(o);
  ResolvedCall resolved;
  resolved.native_image = "/store/images/sha256-x.img";
  absl::StatusOr<pb::ExecuteResponse> r =
      m.Execute(CreateCall(12), resolved, [] { return false; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exec().exit_code(), 1);  // the helper got one successful VmAnswer
  EXPECT_EQ(actions.load(), 1);
}

// Attacks as the helper's uid would make them: a VmRequest for another sandbox, a second boot,
// a call privhelper never made, an action the call does not permit, a second request before
// the first was answered, and any VmRequest from a provider without VMs. Each kills the
// helper (its call fails as if it had exited) and runs no action beyond what was permitted.
TEST_F(HelperManagerTest, AHelperBreakingTheVmPermitTableIsKilledAndNothingUnpermittedRuns) {
  struct Case {
    int64_t generation;
    bool with_vm_actions;
    int max_actions;
  };
  for (const Case& c : {Case{13, true, 0}, Case{14, true, 1}, Case{15, true, 0},
                        Case{16, true, 0}, Case{17, true, 1}, Case{12, false, 0}}) {
    SCOPED_TRACE(c.generation);
    std::atomic<int> actions{0};
    HelperOptions o = VmFakeOptions();
    if (c.with_vm_actions) {
      o.vm_actions = [&actions](const pb::ExecuteRequest&, const ResolvedCall&,
                                const pb::VmRequest&) {
        ++actions;
        return absl::OkStatus();
      };
    }
    HelperManager m(o);
    absl::StatusOr<pb::ExecuteResponse> r =
        m.Execute(CreateCall(c.generation), ResolvedCall{}, [] { return false; });
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsAborted(r.status())) << r.status();
    EXPECT_TRUE(m.WaitUntilNoLiveHelpers(absl::Seconds(30)));
    EXPECT_LE(actions.load(), c.max_actions);
  }
}

// A clock another thread may read while the test moves it (SimulatedClock is single-threaded).
class SharedTestClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::UnixEpoch() + Monotonic(); }
  MonoTime Monotonic() const override { return absl::Nanoseconds(nanos_.load()); }
  void Advance(absl::Duration d) { nanos_ += absl::ToInt64Nanoseconds(d); }

 private:
  std::atomic<int64_t> nanos_{0};
};

// Production's reaper thread: it wakes on real time and judges idleness on the injected clock.
TEST_F(HelperManagerTest, ReaperThreadRetiresIdleHelpers) {
  SharedTestClock clock;
  HelperOptions o;
  o.helper_path = Runfile("privhelper/native/native_helper");
  o.installation_id = kInstallation;
  o.provider_flags = {"--docker_socket=/nonexistent/docker.sock"};
  o.idle_timeout = kIdle;
  o.clock = &clock;
  o.idle_reaper_thread = true;
  o.reap_interval = absl::Milliseconds(10);
  HelperManager m(o);
  ExpectRefusedByTheHelper(Call(m));
  EXPECT_FALSE(m.WaitUntilNoLiveHelpers(absl::Milliseconds(1)));
  clock.Advance(kIdle + absl::Seconds(1));
  EXPECT_TRUE(m.WaitUntilNoLiveHelpers(absl::Seconds(30)));
}

}  // namespace
}  // namespace sn::privhelper

// privhelper's sandboxed spawn path (privhelper/helpers/spawn.h) and the helper's seccomp
// policy (privhelper/native/seccomp_policy.h), proven with a probe binary started exactly as a
// native helper is: it reports what it sees, and tries what the filters forbid.
// Needs root (CAP_SETPCAP for the securebits and the bounding set); skips loudly otherwise and
// fails under CI=true.
#include "privhelper/helpers/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "privhelper/native/seccomp_policy.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper {
namespace {

std::string Runfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  return (srcdir && ws) ? std::string(srcdir) + "/" + ws + "/" + rel : rel;
}

struct ProbeRun {
  std::map<std::string, std::string> facts;  // "key" -> "value" of each reported line
  std::string report;
  int status = -1;  // waitpid status
};

class SpawnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SN_REQUIRE_ROOT();
    absl::StatusOr<std::vector<sock_filter>> f =
        native::ExportHelperFilter(native::HelperFilter::kSpawn, "docker");
    ASSERT_TRUE(f.ok()) << f.status();
    filter_ = std::move(*f);
  }

  ProbeRun Probe(std::vector<std::string> args, int extra_fd = -1) {
    ProbeRun run;
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    SpawnSpec spec;
    spec.path = Runfile("tests/privhelper/helpers/sandbox_probe");
    spec.argv = {spec.path};
    for (std::string& a : args) spec.argv.push_back(std::move(a));
    spec.channel_fd = sv[1];
    spec.extra_fd = extra_fd;
    spec.filter = filter_;
    absl::StatusOr<pid_t> pid = SpawnSandboxed(spec);
    close(sv[1]);
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) {
      close(sv[0]);
      return run;
    }
    char buf[4096];
    for (;;) {
      ssize_t n = read(sv[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      run.report.append(buf, static_cast<size_t>(n));
    }
    close(sv[0]);
    while (waitpid(*pid, &run.status, 0) < 0 && errno == EINTR) {
    }
    for (absl::string_view line : absl::StrSplit(run.report, '\n', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
      run.facts[kv.first] = kv.second;
    }
    return run;
  }

  static bool ExitedOk(const ProbeRun& r) { return WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0; }
  static bool KilledBySeccomp(const ProbeRun& r) {
    return WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSYS;
  }

  std::vector<sock_filter> filter_;
};

TEST_F(SpawnTest, ChildHasOnlyItsDescriptorsNoEnvironmentItsLimitsAndNoPrivilege) {
  // privhelper blocks SIGTERM in every thread; the helper must not inherit that.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  setenv("SN_SECRET_OF_THE_PARENT", "x", 1);
  int stray = open("/dev/null", O_RDONLY);  // not close-on-exec: must not reach the child
  ProbeRun r = Probe({"report"});
  close(stray);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(ExitedOk(r)) << r.status << "\n" << r.report;
  EXPECT_EQ(r.facts["fds"], "0,1,2,3");
  EXPECT_EQ(r.facts["env"], "0");
  const SandboxLimits limits;
  EXPECT_EQ(r.facts["nofile"], absl::StrCat(limits.open_files, "/", limits.open_files));
  EXPECT_EQ(r.facts["core"], "0/0");
  EXPECT_EQ(r.facts["as"],
            absl::StrCat(limits.address_space_bytes, "/", limits.address_space_bytes));
  EXPECT_EQ(r.facts["sigmask_blocked"], "0");
  std::string status;
  for (const auto& [k, v] : r.facts) {
    if (absl::StartsWith(k, "status ")) status += k.substr(7) + "\n";
  }
  // The probe does not load kServing: one filter.
  EXPECT_TRUE(CheckSandboxedStatus(status, /*min_filters=*/1).ok()) << status;
  EXPECT_NE(status.find("CapBnd:\t0000000000000000"), std::string::npos) << status;
}

TEST_F(SpawnTest, ExtraDescriptorBecomesFdFour) {
  int lease = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ProbeRun r = Probe({"report"}, lease);
  close(lease);
  ASSERT_TRUE(ExitedOk(r)) << r.report;
  EXPECT_EQ(r.facts["fds"], "0,1,2,3,4");
}

TEST_F(SpawnTest, OpeningAFileForWritingIsRefusedAndCreatesNothing) {
  sn::testing::ShortTempDir dir;
  const std::string path = dir.File("planted");
  ProbeRun r = Probe({"open_write", path});
  ASSERT_TRUE(ExitedOk(r)) << r.report;
  EXPECT_EQ(r.facts["open_write"], absl::StrCat("-1 errno=", EPERM));
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0);
}

TEST_F(SpawnTest, OnlyUnixSocketsMayBeCreated) {
  ProbeRun inet = Probe({"socket_inet"});
  ASSERT_TRUE(ExitedOk(inet)) << inet.report;
  EXPECT_EQ(inet.facts["socket_inet"], absl::StrCat("-1 errno=", EPERM));
  ProbeRun unix_socket = Probe({"socket_unix"});
  ASSERT_TRUE(ExitedOk(unix_socket)) << unix_socket.report;
  EXPECT_NE(unix_socket.facts["socket_unix"].substr(0, 2), "-1") << unix_socket.report;
}

TEST_F(SpawnTest, FilesystemMutationKillsTheProcessAndChangesNothing) {
  sn::testing::ShortTempDir dir;
  const std::string path = dir.File("keep");
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  ProbeRun r = Probe({"unlink", path});
  EXPECT_TRUE(KilledBySeccomp(r)) << r.status << " " << r.report;
  EXPECT_EQ(r.facts.count("unlink"), 0u);
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0);
}

TEST_F(SpawnTest, PtraceAndNewNamespacesKillTheProcess) {
  EXPECT_TRUE(KilledBySeccomp(Probe({"ptrace"})));
  EXPECT_TRUE(KilledBySeccomp(Probe({"unshare"})));
}

TEST_F(SpawnTest, Clone3AnswersEnosysSoGlibcFallsBackToClone) {
  ProbeRun r = Probe({"clone3"});
  ASSERT_TRUE(ExitedOk(r)) << r.report;
  EXPECT_EQ(r.facts["clone3"], absl::StrCat("-1 errno=", ENOSYS));
}

TEST_F(SpawnTest, ServingFilterAllowsThreadsButNoForkExecFileOrExecutableMemory) {
  ProbeRun thread = Probe({"serving", "thread"});
  ASSERT_TRUE(ExitedOk(thread)) << thread.report;
  EXPECT_EQ(thread.facts["thread"], "1");

  ProbeRun fork = Probe({"serving", "fork"});
  ASSERT_TRUE(ExitedOk(fork)) << fork.report;
  EXPECT_EQ(fork.facts["fork"], absl::StrCat("-1 errno=", EPERM));

  ProbeRun open = Probe({"serving", "open_read"});
  ASSERT_TRUE(ExitedOk(open)) << open.report;
  if (kSanitizerBuild) {  // the sanitizer runtime reads /proc (sanitizer_build.h)
    EXPECT_NE(open.facts["open_read"].substr(0, 2), "-1") << open.report;
  } else {
    EXPECT_EQ(open.facts["open_read"], absl::StrCat("-1 errno=", EPERM));
  }

  ProbeRun mmap = Probe({"serving", "mmap_exec"});
  ASSERT_TRUE(ExitedOk(mmap)) << mmap.report;
  EXPECT_EQ(mmap.facts["mmap_exec"], absl::StrCat("-1 errno=", EPERM));

  ProbeRun signal = Probe({"serving", "signal_parent"});
  ASSERT_TRUE(ExitedOk(signal)) << signal.report;
  EXPECT_EQ(signal.facts["signal_parent"], absl::StrCat("-1 errno=", EPERM));

  ProbeRun exec = Probe({"serving", "exec"});
  EXPECT_EQ(exec.facts["serving"], "1");
  EXPECT_TRUE(KilledBySeccomp(exec)) << exec.status << " " << exec.report;
}

TEST_F(SpawnTest, AFailingStepIsReportedWithItsErrno) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  SpawnSpec spec;
  spec.path = "/nonexistent/helper";
  spec.argv = {spec.path};
  spec.channel_fd = sv[1];
  spec.filter = filter_;
  absl::StatusOr<pid_t> pid = SpawnSandboxed(spec);
  close(sv[0]);
  close(sv[1]);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("execve"), absl::string_view::npos) << pid.status();
  EXPECT_NE(pid.status().message().find(strerror(ENOENT)), absl::string_view::npos);
}

// CheckSandboxedStatus on texts as the kernel writes them.
constexpr char kSandboxed[] =
    "Name:\tnative_helper\nUid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\n"
    "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
    "CapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t2\n";

TEST(CheckSandboxedStatusTest, AcceptsNoCapabilityNoNewPrivsAndBothFilters) {
  EXPECT_TRUE(CheckSandboxedStatus(kSandboxed, 2).ok());
}

TEST(CheckSandboxedStatusTest, RefusesAnyCapabilityMissingFilterOrNoNewPrivs) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = kSandboxed;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_FALSE(CheckSandboxedStatus(with("CapBnd:\t0000000000000000",
                                         "CapBnd:\t000001ffffffffff"), 2).ok());
  EXPECT_FALSE(CheckSandboxedStatus(with("CapEff:\t0000000000000000",
                                         "CapEff:\t0000000000000400"), 2).ok());
  EXPECT_FALSE(CheckSandboxedStatus(with("CapAmb:\t0000000000000000",
                                         "CapAmb:\t0000000000000001"), 2).ok());
  EXPECT_FALSE(CheckSandboxedStatus(with("NoNewPrivs:\t1", "NoNewPrivs:\t0"), 2).ok());
  EXPECT_FALSE(CheckSandboxedStatus(with("Seccomp:\t2", "Seccomp:\t0"), 2).ok());
  EXPECT_FALSE(CheckSandboxedStatus(with("Seccomp_filters:\t2", "Seccomp_filters:\t1"), 2).ok());
  EXPECT_FALSE(CheckSandboxedStatus(with("NoNewPrivs:\t1\n", ""), 2).ok());
}

}  // namespace
}  // namespace sn::privhelper

// The per-VM supervisor with a stand-in for qemu (/bin/sh running a script): it runs the VM
// unprivileged, bounds its console, outlives whoever started it, takes the VM down with it,
// and the record finds exactly the live supervisor again. Needs root (the VM's uid drop);
// skips loudly otherwise unless CI=true (then it fails).
#include "privhelper/native/microvm/vm_process.h"
#include "privhelper/native/microvm/vm_cgroup.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/atomic_file.h"
#include "gtest/gtest.h"

namespace sn::microvm {
namespace {

constexpr uid_t kVmUid = 65534;

std::string Supervisor() {
  return std::string(std::getenv("TEST_SRCDIR")) +
         "/sandbox_node/privhelper/native/microvm/supervisor/vm_supervisor";
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Waits (up to a generous deadline for a loaded machine) until `done` holds.
bool Eventually(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    usleep(10 * 1000);
  }
  return true;
}

bool Gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      const char* ci = std::getenv("CI");
      if (ci != nullptr && std::string(ci) == "true") FAIL() << "needs root (CI=true)";
      GTEST_SKIP() << "SKIPPED LOUDLY: the supervisor's uid drop needs root";
    }
    // Orphans (the supervisors) come to this process, which reaps them in TearDown.
    ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/vm" + std::to_string(counter_++);
    ASSERT_EQ(mkdir(dir_.c_str(), 0711), 0);
  }

  void TearDown() override {
    absl::StatusOr<std::optional<LiveVm>> vm = FindLiveVm(dir_);
    if (vm.ok() && vm->has_value()) kill((*vm)->record().supervisor_pid, SIGKILL);
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  // Runs the supervisor in the foreground; its exit code (0: the VM runs and is recorded). Its
  // standard error goes to `err` when given.
  int Start(const std::string& script, std::vector<std::string> flags = {},
            const std::string& err = "") {
    std::vector<std::string> argv = {Supervisor(), "--vm-dir=" + dir_,
                                     "--uid=" + std::to_string(kVmUid),
                                     "--gid=" + std::to_string(kVmUid)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", "/bin/sh", "-c", script});
    pid_t pid = fork();
    if (pid == 0) {
      std::vector<char*> av;
      for (std::string& a : argv) av.push_back(a.data());
      av.push_back(nullptr);
      if (!err.empty()) dup2(open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 2);
      execv(av[0], av.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  SupervisorRecord Live() {
    absl::StatusOr<std::optional<LiveVm>> vm = FindLiveVm(dir_);
    EXPECT_TRUE(vm.ok()) << vm.status();
    EXPECT_TRUE(vm.ok() && vm->has_value()) << "no live VM in " << dir_;
    return vm.ok() && vm->has_value() ? (*vm)->record() : SupervisorRecord{};
  }

  bool NotLive() {
    absl::StatusOr<std::optional<LiveVm>> vm = FindLiveVm(dir_);
    return vm.ok() && !vm->has_value();
  }

  std::string dir_;
  static inline int counter_ = 0;
};

TEST_F(SupervisorTest, QemuRunsUnprivilegedInTheSupervisorsOwnSession) {
  ASSERT_EQ(Start("grep -E '^(Uid|Gid|Groups|NoNewPrivs|CapEff|CapBnd):' /proc/self/status; "
                  "echo fds $(ls /proc/self/fd | wc -l); exec sleep 1000"),
            0);
  const SupervisorRecord r = Live();
  ASSERT_GT(r.qemu_pid, 0);
  const std::string log = dir_ + "/console.log";
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(ReadAll(log), "fds"); })) << ReadAll(log);
  const std::string console = ReadAll(log);
  EXPECT_TRUE(absl::StrContains(console, "Uid:\t65534\t65534\t65534\t65534")) << console;
  EXPECT_TRUE(absl::StrContains(console, "Gid:\t65534\t65534\t65534\t65534")) << console;
  EXPECT_TRUE(absl::StrContains(console, "Groups:\t \n") ||
              absl::StrContains(console, "Groups:\t\n"))
      << console;
  EXPECT_TRUE(absl::StrContains(console, "NoNewPrivs:\t1")) << console;
  EXPECT_TRUE(absl::StrContains(console, "CapEff:\t0000000000000000")) << console;
  EXPECT_TRUE(absl::StrContains(console, "CapBnd:\t0000000000000000")) << console;
  // ls's own descriptors: 0-2 and the one it reads /proc/self/fd with.
  EXPECT_TRUE(absl::StrContains(console, "fds 4")) << console;
  EXPECT_NE(getsid(r.supervisor_pid), getsid(0));
}

TEST_F(SupervisorTest, TheConsoleLogIsBounded) {
  ASSERT_EQ(Start("yes 0123456789 | head -c 200000; exec sleep 1000", {"--console-bytes=1000"}),
            0);
  const std::string log = dir_ + "/console.log";
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(ReadAll(log), "truncated"); }));
  const std::string console = ReadAll(log);
  EXPECT_EQ(console.substr(0, 11), "0123456789\n");
  EXPECT_LE(console.size(), 1000u + 64u) << console.size();
}

TEST_F(SupervisorTest, TheVmOutlivesTheProcessThatStartedIt) {
  // A stand-in for privhelper: its own process group, starts the VM, then is SIGKILLed with
  // its whole group.
  pid_t starter = fork();
  if (starter == 0) {
    setpgid(0, 0);
    _exit(Start("exec sleep 1000") == 0 ? (pause(), 0) : 1);
  }
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<std::optional<LiveVm>> vm = FindLiveVm(dir_);
    return vm.ok() && vm->has_value();
  }));
  kill(-starter, SIGKILL);
  waitpid(starter, nullptr, 0);
  const SupervisorRecord r = Live();
  EXPECT_FALSE(Gone(r.qemu_pid));
}

TEST_F(SupervisorTest, KillingTheSupervisorTakesQemuWithIt) {
  ASSERT_EQ(Start("exec sleep 1000"), 0);
  const SupervisorRecord r = Live();
  ASSERT_EQ(kill(r.supervisor_pid, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    return Gone(r.qemu_pid) && NotLive();
  }));
}

TEST_F(SupervisorTest, QemuThatEndsEndsTheSupervisorAndTheLogSaysHow) {
  ASSERT_EQ(Start("echo booting; exit 7"), 0);
  const std::string log = dir_ + "/console.log";
  ASSERT_TRUE(Eventually([&] {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    return NotLive() && absl::StrContains(ReadAll(log), "qemu exited with 7");
  })) << ReadAll(log);
  EXPECT_TRUE(absl::StartsWith(ReadAll(log), "booting\n"));
}

TEST_F(SupervisorTest, AQemuThatCannotStartIsAFailedStartNotARecord) {
  std::vector<std::string> argv = {Supervisor(), "--vm-dir=" + dir_, "--uid=0", "--gid=0", "--",
                                   "/bin/true"};
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> av;
    for (std::string& a : argv) av.push_back(a.data());
    av.push_back(nullptr);
    execv(av[0], av.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 2);  // root is refused as the VM's user: usage error
  EXPECT_TRUE(NotLive());
}

// A policy that does not read or compile is refused by the supervisor as root before anything
// starts: exit 1 with the reason, no console log, no record, no VM process.
TEST_F(SupervisorTest, ABadSeccompPolicyStartsNothingAndSaysWhy) {
  const std::string head = "{\"format\":\"sandbox-node-qemu-seccomp/1\",\"allow\":[";
  struct Case {
    std::string name, text, reason;
  };
  const Case cases[] = {
      {"unknown", head + "\"execve\",\"nosuchcall\"]}", "is not a system call of x86-64"},
      {"no-execve", head + "\"read\",\"exit_group\"]}", "must name execve"},
      {"oversize", head + "\"execve\"]}" + std::string(64 * 1024, ' '), "at most 65536 bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string policy = std::string(std::getenv("TEST_TMPDIR")) + "/" + c.name + ".json";
    std::ofstream(policy) << c.text;
    const std::string err = std::string(std::getenv("TEST_TMPDIR")) + "/" + c.name + ".err";
    EXPECT_EQ(Start("exec sleep 1000", {"--seccomp-policy=" + policy}, err), 1);
    const std::string said = ReadAll(err);
    EXPECT_TRUE(absl::StrContains(said, "vm_supervisor: --seccomp-policy: " + policy)) << said;
    EXPECT_TRUE(absl::StrContains(said, c.reason)) << said;
    struct stat st;
    EXPECT_NE(stat((dir_ + "/console.log").c_str(), &st), 0);
    EXPECT_NE(stat((dir_ + "/" + kSupervisorRecord).c_str(), &st), 0);
    EXPECT_TRUE(NotLive());
  }
}

TEST_F(SupervisorTest, ARecordWhosePidWasReusedIsNotALiveVm) {
  absl::StatusOr<uint64_t> start = ProcessStartTime(getpid());
  ASSERT_TRUE(start.ok()) << start.status();
  SupervisorRecord r{getpid(), *start + 1, getpid(), *start};
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/" + kSupervisorRecord, EncodeSupervisorRecord(r), 0600)
                  .ok());
  EXPECT_TRUE(NotLive());
  r.supervisor_start = *start;
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/" + kSupervisorRecord, EncodeSupervisorRecord(r), 0600)
                  .ok());
  EXPECT_EQ(Live().supervisor_pid, getpid());
  unlink((dir_ + "/" + kSupervisorRecord).c_str());  // TearDown kills a live record's supervisor
}

TEST_F(SupervisorTest, AnUnreadableRecordIsUnknownNotAbsent) {
  for (const char* text :
       {"{", "{\"schema\":1}", "[]",
        "{\"schema\":1,\"supervisor_pid\":1,\"supervisor_start\":1,\"qemu_pid\":1,"
        "\"qemu_start\":1,\"extra\":1}",
        "{\"schema\":1,\"supervisor_pid\":0,\"supervisor_start\":1,\"qemu_pid\":1,"
        "\"qemu_start\":1}"}) {
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/" + kSupervisorRecord, text, 0600).ok());
    absl::StatusOr<std::optional<LiveVm>> vm = FindLiveVm(dir_);
    EXPECT_TRUE(absl::IsUnavailable(vm.status())) << text << ": " << vm.status();
  }
}


// qemu runs in a cgroup of its own whose CPU bandwidth is exactly --cpu-millis (vm_cgroup.h),
// joined before the uid drop; the supervisor removes the cgroup once qemu is reaped.
class SupervisorCgroupTest : public SupervisorTest {
 protected:
  void SetUp() override {
    SupervisorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    absl::StatusOr<CpuHierarchy> h = FindCpuHierarchy();
    ASSERT_TRUE(h.ok()) << h.status();
    hierarchy_ = *h;
    absl::StatusOr<std::string> parent = MakeVmCgroupParent(hierarchy_);
    ASSERT_TRUE(parent.ok()) << parent.status();
    leaf_ = absl::StrCat(*parent, "/supervisor-test-", getpid(), "-", counter_);
  }
  void TearDown() override {
    SupervisorTest::TearDown();
    if (!leaf_.empty()) rmdir(leaf_.c_str());
  }
  // The cgroup's bandwidth as "quota period".
  std::string Bandwidth() {
    if (hierarchy_.version == 2) return ReadAll(leaf_ + "/cpu.max");
    return absl::StrCat(absl::StripAsciiWhitespace(ReadAll(leaf_ + "/cpu.cfs_quota_us")), " ",
                        ReadAll(leaf_ + "/cpu.cfs_period_us"));
  }
  bool LeafExists() {
    struct stat st;
    return stat(leaf_.c_str(), &st) == 0;
  }
  CpuHierarchy hierarchy_;
  std::string leaf_;
};

TEST_F(SupervisorCgroupTest, QemuRunsInItsOwnCgroupWithExactlyTheQuotaAndItIsRemovedAfter) {
  struct Case {
    int64_t millis;
    std::string bandwidth;
  };
  for (const Case& c : {Case{1500, "150000 100000\n"}, Case{5, "5000 1000000\n"}}) {
    SCOPED_TRACE(c.millis);
    ASSERT_EQ(Start("cat /proc/self/cgroup; exec sleep 1000",
                    {"--cpu-cgroup=" + leaf_, absl::StrCat("--cpu-millis=", c.millis)}),
              0);
    const SupervisorRecord r = Live();
    EXPECT_EQ(Bandwidth(), c.bandwidth);
    // qemu (the stand-in) is in the leaf (it moves itself there before its exec), the
    // supervisor is not.
    EXPECT_TRUE(Eventually(
        [&] { return ReadAll(leaf_ + "/cgroup.procs") == absl::StrCat(r.qemu_pid, "\n"); }))
        << ReadAll(leaf_ + "/cgroup.procs");
    const std::string name = leaf_.substr(leaf_.rfind('/') + 1);
    ASSERT_TRUE(Eventually([&] { return absl::StrContains(ReadAll(dir_ + "/console.log"), name); }))
        << ReadAll(dir_ + "/console.log");
    EXPECT_FALSE(absl::StrContains(ReadAll(absl::StrCat("/proc/", r.supervisor_pid, "/cgroup")),
                                   name));
    kill(r.qemu_pid, SIGKILL);
    EXPECT_TRUE(Eventually([&] {
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      return NotLive() && !LeafExists();
    }));
  }
}

// A supervisor killed by SIGKILL leaves its (empty) cgroup: the VM's next boot uses it again.
TEST_F(SupervisorCgroupTest, AKilledSupervisorsCgroupIsUsedAgain) {
  ASSERT_EQ(Start("exec sleep 1000", {"--cpu-cgroup=" + leaf_, "--cpu-millis=250"}), 0);
  SupervisorRecord r = Live();
  kill(r.supervisor_pid, SIGKILL);
  ASSERT_TRUE(Eventually([&] {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    return Gone(r.qemu_pid) && NotLive();
  }));
  ASSERT_TRUE(LeafExists());
  ASSERT_EQ(Start("exec sleep 1000", {"--cpu-cgroup=" + leaf_, "--cpu-millis=2000"}), 0);
  r = Live();
  EXPECT_EQ(Bandwidth(), "200000 100000\n");
  EXPECT_TRUE(Eventually(
      [&] { return ReadAll(leaf_ + "/cgroup.procs") == absl::StrCat(r.qemu_pid, "\n"); }));
  EXPECT_TRUE(RemoveVmCgroup(leaf_).code() != absl::StatusCode::kOk);  // busy while qemu runs
}

// A --cpu-cgroup that is not in a cgroup hierarchy starts nothing.
TEST_F(SupervisorCgroupTest, ACgroupOutsideACgroupFilesystemStartsNothing) {
  const std::string fake = std::string(std::getenv("TEST_TMPDIR")) + "/not-a-cgroup/vm";
  mkdir((std::string(std::getenv("TEST_TMPDIR")) + "/not-a-cgroup").c_str(), 0755);
  const std::string err = std::string(std::getenv("TEST_TMPDIR")) + "/cg.err";
  EXPECT_EQ(Start("exec sleep 1000", {"--cpu-cgroup=" + fake, "--cpu-millis=100"}, err), 1);
  const std::string said = ReadAll(err);
  EXPECT_TRUE(absl::StrContains(said, "is not on a cgroup filesystem")) << said;
  EXPECT_TRUE(NotLive());
  struct stat st;
  EXPECT_NE(stat(fake.c_str(), &st), 0);
}

}  // namespace
}  // namespace sn::microvm

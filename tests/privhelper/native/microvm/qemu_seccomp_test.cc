// qemu's seccomp policy (qemu_seccomp.h): the repository's policy parses and allows execve;
// every bad input is refused with a message naming its rule; a compiled policy lets the calls
// it names through and kills the process (SIGSYS) at any other.
#include "privhelper/native/microvm/qemu_seccomp.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "privhelper/native/seccomp_bpf.h"

namespace sn::microvm {
namespace {

std::string RepositoryPolicyPath() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/sandbox_node/tools/microvm/qemu-seccomp.json";
}

std::string Policy(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& n : names) absl::StrAppend(&list, list.empty() ? "" : ",", "\"", n, "\"");
  return absl::StrCat("{\"format\":\"sandbox-node-qemu-seccomp/1\",\"allow\":[", list, "]}");
}

// The message `text` is refused with ("" when it is accepted).
std::string Refusal(const std::string& text) {
  absl::StatusOr<QemuSeccompPolicy> p = ParseQemuSeccompPolicy(text);
  if (p.ok()) return "";
  EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status();
  return std::string(p.status().message());
}

TEST(QemuSeccompTest, TheRepositorysPolicyParsesAllowsExecveAndCompiles) {
  std::ifstream in(RepositoryPolicyPath());
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<QemuSeccompPolicy> p = ParseQemuSeccompPolicy(text.str());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NE(std::find(p->allowed.begin(), p->allowed.end(), SYS_execve), p->allowed.end());
  // Never the calls qemu's own -sandbox denies outright, nor io_uring's submission side.
  for (int denied : {SYS_execveat, SYS_fork, SYS_vfork, SYS_ptrace, SYS_setuid, SYS_mount,
                     SYS_io_uring_enter, SYS_io_uring_register, SYS_bpf}) {
    EXPECT_EQ(std::find(p->allowed.begin(), p->allowed.end(), denied), p->allowed.end()) << denied;
  }
  absl::StatusOr<std::vector<sock_filter>> program = CompileQemuSeccompPolicy(*p);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_FALSE(program->empty());
  // As the supervisor reads it: a regular file (a link, as the runfiles' own is, is refused).
  EXPECT_FALSE(ReadQemuSeccompPolicy(RepositoryPolicyPath()).ok());
  const std::string copy = std::string(std::getenv("TEST_TMPDIR")) + "/qemu-seccomp.json";
  std::ofstream(copy) << text.str();
  EXPECT_TRUE(ReadQemuSeccompPolicy(copy).ok()) << ReadQemuSeccompPolicy(copy).status();
}

TEST(QemuSeccompTest, TextThatIsNotOneJsonObjectIsRefused) {
  EXPECT_TRUE(absl::StrContains(Refusal(""), "torn or foreign")) << Refusal("");
  EXPECT_TRUE(absl::StrContains(Refusal("[\"execve\"]"), "not a JSON object"));
  EXPECT_TRUE(absl::StrContains(Refusal(Policy({"execve"}) + "{}"), "torn or foreign"));
}

TEST(QemuSeccompTest, MoreThan64KiBIsRefusedWhateverItHolds) {
  std::string padded = Policy({"execve"});
  padded.insert(1, std::string(kMaxQemuSeccompBytes + 1 - padded.size(), ' '));
  ASSERT_EQ(padded.size(), kMaxQemuSeccompBytes + 1);
  EXPECT_TRUE(absl::StrContains(Refusal(padded), "larger than 65536 bytes")) << Refusal(padded);
  padded.erase(1, 1);  // exactly the bound
  EXPECT_EQ(Refusal(padded), "");
}

TEST(QemuSeccompTest, AnUnknownOrDuplicatedMemberIsRefusedByName) {
  EXPECT_TRUE(absl::StrContains(
      Refusal("{\"format\":\"sandbox-node-qemu-seccomp/1\",\"allow\":[\"execve\"],\"deny\":[]}"),
      "member 'deny' is unknown"));
  EXPECT_TRUE(absl::StrContains(
      Refusal("{\"format\":\"sandbox-node-qemu-seccomp/1\",\"allow\":[\"execve\"],"
              "\"allow\":[\"execve\",\"ptrace\"]}"),
      "duplicate member 'allow'"));
}

TEST(QemuSeccompTest, AMissingOrForeignFormatIsRefused) {
  EXPECT_TRUE(absl::StrContains(Refusal("{\"allow\":[\"execve\"]}"), "'format'"))
      << Refusal("{\"allow\":[\"execve\"]}");
  const std::string other = "{\"format\":\"sandbox-node-qemu-seccomp/2\",\"allow\":[\"execve\"]}";
  EXPECT_TRUE(absl::StrContains(Refusal(other), "'format' is not \"sandbox-node-qemu-seccomp/1\""))
      << Refusal(other);
  // A Docker seccomp profile (another provider's `seccomp` artifact) is no qemu policy.
  EXPECT_NE(Refusal("{\"defaultAction\":\"SCMP_ACT_ERRNO\"}"), "");
}

TEST(QemuSeccompTest, AnEntryThatIsNotAStringOrAnAllowThatIsNotAListIsRefused) {
  const std::string number = "{\"format\":\"sandbox-node-qemu-seccomp/1\",\"allow\":[\"execve\",59]}";
  EXPECT_TRUE(absl::StrContains(Refusal(number), "'allow'[1] must be a string")) << Refusal(number);
  const std::string one = "{\"format\":\"sandbox-node-qemu-seccomp/1\",\"allow\":\"execve\"}";
  EXPECT_TRUE(absl::StrContains(Refusal(one), "'allow'")) << Refusal(one);
}

TEST(QemuSeccompTest, ANameThatIsNoSystemCallOfX8664RefusesTheWholePolicy) {
  EXPECT_EQ(Refusal(Policy({"execve", "read"})), "");
  EXPECT_TRUE(absl::StrContains(Refusal(Policy({"execve", "nosuchcall"})),
                                "'allow'[1] 'nosuchcall' is not a system call of x86-64"))
      << Refusal(Policy({"execve", "nosuchcall"}));
  // i386's multiplexer: libseccomp knows the name, x86-64 has no such call.
  EXPECT_TRUE(absl::StrContains(Refusal(Policy({"socketcall", "execve"})),
                                "'allow'[0] 'socketcall' is not a system call of x86-64"));
  EXPECT_TRUE(absl::StrContains(Refusal(Policy({"execve", ""})), "is not a system call"));
  // The input is never echoed: a name that is not short printable text is not quoted.
  const std::string odd = Refusal(Policy({"execve", "read\\u0007write"}));
  EXPECT_TRUE(absl::StrContains(odd, "is not a system call")) << odd;
  EXPECT_FALSE(absl::StrContains(odd, "\a")) << odd;
}

TEST(QemuSeccompTest, ANameGivenTwiceIsRefused) {
  EXPECT_TRUE(absl::StrContains(Refusal(Policy({"execve", "read", "read"})),
                                "'allow'[2] 'read' is named twice"));
}

TEST(QemuSeccompTest, MoreThan512NamesAreRefused) {
  // Only the count is judged first: 513 entries of any name.
  std::vector<std::string> names(kMaxQemuSeccompCalls + 1, "read");
  EXPECT_TRUE(absl::StrContains(Refusal(Policy(names)), "more than 512 calls"))
      << Refusal(Policy(names));
}

TEST(QemuSeccompTest, APolicyThatDoesNotAllowExecveIsRefusedWithThatReason) {
  EXPECT_TRUE(absl::StrContains(Refusal(Policy({"read", "write", "exit_group"})),
                                "must name execve: the policy is loaded before qemu's execve"));
  EXPECT_TRUE(absl::StrContains(Refusal(Policy({})), "must name execve"));
}

TEST(QemuSeccompTest, AFileIsReadWithinTheBoundAndItsPathIsNamed) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  EXPECT_TRUE(absl::IsNotFound(ReadQemuSeccompPolicy(dir + "/absent.json").status()));
  std::ofstream(dir + "/big.json") << std::string(kMaxQemuSeccompBytes + 1, ' ');
  absl::Status big = ReadQemuSeccompPolicy(dir + "/big.json").status();
  EXPECT_TRUE(absl::StrContains(big.message(), dir + "/big.json")) << big;
  EXPECT_TRUE(absl::StrContains(big.message(), "at most 65536 bytes")) << big;
  std::ofstream(dir + "/noexec.json") << Policy({"read"});
  absl::Status noexec = ReadQemuSeccompPolicy(dir + "/noexec.json").status();
  EXPECT_TRUE(absl::IsInvalidArgument(noexec)) << noexec;
  EXPECT_TRUE(absl::StrContains(noexec.message(), dir + "/noexec.json: qemu seccomp policy: "))
      << noexec;
}

// Runs `call` in a child under the compiled policy `names`; the child's wait status.
int StatusUnder(const std::vector<std::string>& names, long call) {
  absl::StatusOr<QemuSeccompPolicy> p = ParseQemuSeccompPolicy(Policy(names));
  EXPECT_TRUE(p.ok()) << p.status();
  absl::StatusOr<std::vector<sock_filter>> program = CompileQemuSeccompPolicy(*p);
  EXPECT_TRUE(program.ok()) << program.status();
  const pid_t pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(2);
    if (native::LoadFilterProgram(*program) != 0) _exit(3);
    syscall(call);
    syscall(SYS_exit_group, 0);  // raw: a sanitizer's _exit makes calls of its own
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(QemuSeccompTest, ACompiledPolicyLetsItsCallsThroughAndKillsAtAnyOther) {
  const int allowed = StatusUnder({"execve", "exit_group", "getppid"}, SYS_getppid);
  EXPECT_TRUE(WIFEXITED(allowed) && WEXITSTATUS(allowed) == 0) << allowed;
  const int denied = StatusUnder({"execve", "exit_group"}, SYS_getppid);
  EXPECT_TRUE(WIFSIGNALED(denied) && WTERMSIG(denied) == SIGSYS) << denied;
}

}  // namespace
}  // namespace sn::microvm

// vm_supervisor: owns one microVM's qemu, so a running VM outlives every restart of the
// node's own processes (containerd's shim is the model).
// It is the node's one executable (//:sandbox-node) started under the name "vm_supervisor"
// (the spec's host release has no artifact kind of its own for it; docs/protocol.md 24h).
//
//   vm_supervisor --vm-dir=DIR --uid=U --gid=G [--console-bytes=N] [--agent-socket=PATH]
//                 [--data-limit=BYTES] [--seccomp-policy=PATH]
//                 [--cpu-cgroup=DIR --cpu-millis=N] -- QEMU ARG...
//   vm_supervisor --help | --version   (standard output, exit 0; common/build_info.h)
//
// The process started by the caller forks the supervisor and exits once the VM runs: 0 when
// qemu was started and DIR/supervisor.json records both processes (vm_process.h), 1 with a
// reason on standard error otherwise. So the supervisor is nobody's child but init's (or the
// caller's subreaper's), in a session of its own: a SIGKILL of the caller, of privhelper or of
// the native helper does not reach it.
//
// With --agent-socket, the supervisor (still root) binds and listens on a unix socket at PATH
// (mode 0600, root's; a stale one is replaced) and hands it to qemu as descriptor 3
// (qemu_command.h, kAgentSocketFd): the guest channel's socket lives in the VM's root-owned
// directory, where qemu can neither create nor replace anything.
// The supervisor starts qemu as uid U / gid G with no supplementary groups, no_new_privs, no
// core dumps, an empty environment, standard input /dev/null and only descriptors 0-2 (and 3,
// the agent socket) open, and with --data-limit that RLIMIT_DATA (qemu's private writable
// memory: guest RAM, translation buffer, heap, thread stacks), so a qemu that balloons fails
// its allocations instead of growing the host's memory;
// with --cpu-cgroup and --cpu-millis, qemu runs in the cgroup DIR (made if missing; its parent
// must be a cgroup directory) whose CPU bandwidth is exactly N thousandths of a CPU
// (vm_cgroup.h): qemu's process moves itself there before it drops to U, and the supervisor
// removes DIR once qemu is reaped;
// with --seccomp-policy, the release's policy for qemu (qemu_seccomp.h): read and compiled by
// the supervisor as root before anything starts (a bad policy: exit 1 with the reason, nothing
// started), loaded in qemu's process as the last step before its execve; the node always
// passes it (VmStore), the supervisor's own tests run a shell in qemu's place without it;
// qemu gets SIGKILL if the supervisor dies (PR_SET_PDEATHSIG), so "the supervisor runs" and
// "the VM runs" are one fact. qemu's standard output and error (the serial console and
// qemu's own messages) go to DIR/console.log, at most N bytes (default 1 MiB), then one
// truncation line. SIGTERM is passed on to qemu. When qemu ends, the supervisor writes its
// status as the log's last line and exits.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"
#include "common/build_info.h"
#include "common/entry_points.h"
#include "privhelper/native/microvm/qemu_command.h"
#include "privhelper/native/microvm/qemu_seccomp.h"
#include "privhelper/native/microvm/vm_cgroup.h"
#include "privhelper/native/microvm/vm_process.h"
#include "privhelper/native/seccomp_bpf.h"

namespace sn::microvm {
namespace {

struct Options {
  std::string vm_dir;
  uid_t uid = 0;
  gid_t gid = 0;
  size_t console_bytes = 1 << 20;
  std::string agent_socket;  // absolute; "" = none
  uint64_t data_limit = 0;   // RLIMIT_DATA for qemu; 0 = unchanged
  std::string seccomp_policy;  // "" = none
  std::string cpu_cgroup;      // "" = none (the supervisor's own tests)
  int64_t cpu_millis = 0;
  std::vector<std::string> qemu;
};

constexpr char kUsageLine[] =
    "usage: vm_supervisor --vm-dir=DIR --uid=U --gid=G "
    "[--console-bytes=N] [--agent-socket=PATH] [--data-limit=BYTES] [--seccomp-policy=PATH] "
    "[--cpu-cgroup=DIR --cpu-millis=N] -- QEMU ARG...\n";

constexpr char kHelp[] =
    "usage: vm_supervisor --vm-dir=DIR --uid=U --gid=G [--console-bytes=N]\n"
    "                     [--agent-socket=PATH] [--data-limit=BYTES]\n"
    "                     [--seccomp-policy=PATH] [--cpu-cgroup=DIR --cpu-millis=N]\n"
    "                     -- QEMU ARG...\n"
    "       vm_supervisor --help | --version\n"
    "  One microVM's supervisor: privhelper starts it (never by hand) as root; it starts\n"
    "  qemu as U:G and outlives the node's processes. Exit status: 0 once qemu runs and\n"
    "  DIR/supervisor.json records it, 1 otherwise, 2 usage.\n";

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "vm_supervisor: %s\n%s", why.c_str(), kUsageLine);
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  bool uid = false, gid = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    auto value = [&](std::string_view flag) -> std::optional<std::string_view> {
      if (a.substr(0, flag.size()) != flag) return std::nullopt;
      return a.substr(flag.size());
    };
    uint64_t n = 0;
    if (auto v = value("--vm-dir=")) {
      o.vm_dir = std::string(*v);
    } else if (auto v = value("--uid=")) {
      if (!absl::SimpleAtoi(AV(*v), &n) || n == 0 || n > 0xfffffffe) Usage("--uid: not a non-root uid");
      o.uid = static_cast<uid_t>(n);
      uid = true;
    } else if (auto v = value("--gid=")) {
      if (!absl::SimpleAtoi(AV(*v), &n) || n == 0 || n > 0xfffffffe) Usage("--gid: not a non-root gid");
      o.gid = static_cast<gid_t>(n);
      gid = true;
    } else if (auto v = value("--agent-socket=")) {
      o.agent_socket = std::string(*v);
      if (o.agent_socket.empty() || o.agent_socket[0] != '/' ||
          o.agent_socket.size() >= sizeof(sockaddr_un{}.sun_path)) {
        Usage("--agent-socket: not an absolute path a unix socket can have");
      }
    } else if (auto v = value("--data-limit=")) {
      if (!absl::SimpleAtoi(AV(*v), &n) || n < (uint64_t{64} << 20)) Usage("--data-limit");
      o.data_limit = n;
    } else if (auto v = value("--seccomp-policy=")) {
      o.seccomp_policy = std::string(*v);
      if (o.seccomp_policy.empty() || o.seccomp_policy[0] != '/') {
        Usage("--seccomp-policy must be absolute");
      }
    } else if (auto v = value("--cpu-cgroup=")) {
      o.cpu_cgroup = std::string(*v);
      if (o.cpu_cgroup.empty() || o.cpu_cgroup[0] != '/') Usage("--cpu-cgroup must be absolute");
    } else if (auto v = value("--cpu-millis=")) {
      if (!absl::SimpleAtoi(AV(*v), &n) || n < 1 || n > 256000) Usage("--cpu-millis: 1..256000");
      o.cpu_millis = static_cast<int64_t>(n);
    } else if (auto v = value("--console-bytes=")) {
      if (!absl::SimpleAtoi(AV(*v), &n) || n > (uint64_t{1} << 30)) Usage("--console-bytes");
      o.console_bytes = n;
    } else {
      Usage(absl::StrCat("unknown argument ", AV(a)));
    }
  }
  for (++i; i < argc; ++i) o.qemu.push_back(argv[i]);
  if (o.vm_dir.empty() || o.vm_dir[0] != '/') Usage("--vm-dir must be absolute");
  if (!uid || !gid) Usage("--uid and --gid are required");
  if (o.cpu_cgroup.empty() != (o.cpu_millis == 0)) {
    Usage("--cpu-cgroup and --cpu-millis go together");
  }
  if (o.qemu.empty() || o.qemu[0].empty() || o.qemu[0][0] != '/') Usage("QEMU must be absolute");
  return o;
}

// In the qemu child after fork: the VM's process. Never returns. `policy` (may be empty: none)
// is loaded last, so that from the execve on only the calls it allows run.
[[noreturn]] void ExecQemu(const Options& o, const std::vector<sock_filter>& policy, int out,
                           int agent, const std::string& cgroup_procs) {
  const pid_t supervisor = getppid();
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  int null = open("/dev/null", O_RDONLY);
  if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(125);
  if (agent >= 0 && (dup2(agent, kAgentSocketFd) < 0 || fcntl(kAgentSocketFd, F_SETFD, 0) != 0)) {
    _exit(125);
  }
  syscall(SYS_close_range, agent >= 0 ? kAgentSocketFd + 1 : 3, ~0U, 0);
  // Into the VM's cgroup while still root (its cgroup.procs is root's).
  if (!cgroup_procs.empty()) {
    if (const int err = EnterCgroup(cgroup_procs.c_str()); err != 0) {
      std::fprintf(stderr, "vm_supervisor: entering %s: %s\n", cgroup_procs.c_str(),
                   std::strerror(err));
      _exit(125);
    }
  }
  rlimit core{0, 0};
  setrlimit(RLIMIT_CORE, &core);
  if (o.data_limit > 0) {
    rlimit data{o.data_limit, o.data_limit};
    if (setrlimit(RLIMIT_DATA, &data) != 0) _exit(125);
  }
  // No capability can come back to qemu: its bounding set is emptied (with CAP_SETPCAP, which
  // the supervisor holds as root) before the uid change clears the rest.
  for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      std::fprintf(stderr, "vm_supervisor: dropping capability %d from the bounding set: %s\n",
                   cap, std::strerror(errno));
      _exit(125);
    }
  }
  if (chdir(o.vm_dir.c_str()) != 0 || setgroups(0, nullptr) != 0 || setresgid(o.gid, o.gid, o.gid) != 0 ||
      setresuid(o.uid, o.uid, o.uid) != 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    std::fprintf(stderr, "vm_supervisor: dropping to %u:%u: %s\n", o.uid, o.gid, std::strerror(errno));
    _exit(125);
  }
  // After the uid change, which clears it; then whether the supervisor died before it took.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != supervisor) _exit(125);
  std::vector<char*> argv;
  for (const std::string& a : o.qemu) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  if (!policy.empty()) {
    if (const int err = native::LoadFilterProgram(policy); err != 0) {
      std::fprintf(stderr, "vm_supervisor: loading the seccomp policy: %s\n", std::strerror(err));
      _exit(125);
    }
  }
  execve(argv[0], argv.data(), envp);
  std::fprintf(stderr, "vm_supervisor: exec %s: %s\n", argv[0], std::strerror(errno));
  _exit(127);
}

// A listening unix socket at `path`, mode 0600 (a stale socket of an earlier boot is
// replaced); -1 with errno set on failure.
int ListenAt(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);  // Parse bounded its length
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path.c_str());
  const mode_t old = umask(0177);
  const int rc = bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  umask(old);
  if (rc != 0 || listen(fd, 4) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

volatile sig_atomic_t g_qemu = 0;
void PassTerm(int) {
  if (g_qemu > 0) kill(g_qemu, SIGTERM);
}

// Console bytes to the log, at most `limit`, then one line saying so.
void CopyConsole(int from, int log, size_t limit) {
  std::vector<char> buf(64 * 1024);
  size_t written = 0;
  bool told = false;
  for (;;) {
    ssize_t n = read(from, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    const size_t keep = std::min(static_cast<size_t>(n), limit - written);
    if (keep > 0 && write(log, buf.data(), keep) == static_cast<ssize_t>(keep)) written += keep;
    if (keep < static_cast<size_t>(n) && !told) {
      const char line[] = "\n[vm_supervisor: console log truncated]\n";
      (void)!write(log, line, sizeof(line) - 1);
      told = true;
    }
  }
}

// The supervisor proper (after the first fork and setsid). Reports "started" on `report`
// (one byte '1') once the record is durable, or a reason, then closes it.
int Supervise(const Options& o, const std::vector<sock_filter>& policy, int report) {
  auto fail = [&](const std::string& why) {
    (void)!write(report, why.data(), why.size());
    return 1;
  };
  int log = open((o.vm_dir + "/console.log").c_str(),
                 O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log < 0) return fail(absl::StrCat("console.log: ", std::strerror(errno)));
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return fail("pipe");
  const int agent = o.agent_socket.empty() ? -1 : ListenAt(o.agent_socket);
  if (!o.agent_socket.empty() && agent < 0) {
    return fail(absl::StrCat("agent socket: ", std::strerror(errno)));
  }
  std::string cgroup_procs;
  if (!o.cpu_cgroup.empty()) {
    if (absl::Status s = PrepareVmCgroup(o.cpu_cgroup, o.cpu_millis); !s.ok()) {
      return fail(absl::StrCat("the VM's cgroup: ", s.message()));
    }
    cgroup_procs = o.cpu_cgroup + "/cgroup.procs";
  }
  signal(SIGTERM, PassTerm);
  pid_t qemu = fork();
  if (qemu < 0) return fail("fork");
  if (qemu == 0) ExecQemu(o, policy, pipefd[1], agent, cgroup_procs);
  g_qemu = qemu;
  close(pipefd[1]);
  if (agent >= 0) close(agent);  // qemu's now
  SupervisorRecord r;
  r.supervisor_pid = getpid();
  r.qemu_pid = qemu;
  absl::StatusOr<uint64_t> self = ProcessStartTime(r.supervisor_pid);
  absl::StatusOr<uint64_t> child = ProcessStartTime(qemu);
  absl::Status written = self.ok() && child.ok() ? absl::OkStatus() : absl::InternalError("/proc");
  if (written.ok()) {
    r.supervisor_start = *self;
    r.qemu_start = *child;
    written = WriteFileAtomically(o.vm_dir + "/" + kSupervisorRecord, EncodeSupervisorRecord(r), 0600);
  }
  if (!written.ok()) {
    kill(qemu, SIGKILL);
    waitpid(qemu, nullptr, 0);
    return fail(absl::StrCat("recording the VM: ", written.message()));
  }
  (void)!write(report, "1", 1);
  close(report);
  CopyConsole(pipefd[0], log, o.console_bytes);
  int status = 0;
  while (waitpid(qemu, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string end =
      WIFEXITED(status) ? absl::StrCat("\n[vm_supervisor: qemu exited with ", WEXITSTATUS(status), "]\n")
                        : absl::StrCat("\n[vm_supervisor: qemu killed by signal ", WTERMSIG(status), "]\n");
  (void)!write(log, end.data(), end.size());
  if (!o.cpu_cgroup.empty()) {
    if (absl::Status s = RemoveVmCgroup(o.cpu_cgroup); !s.ok()) {
      const std::string line = absl::StrCat("[vm_supervisor: ", s.message(), "]\n");
      (void)!write(log, line.data(), line.size());
    }
  }
  fsync(log);
  return 0;
}

}  // namespace

int SupervisorMain(int argc, char** argv) {
  if (std::optional<int> answered =
          AnswerHelpOrVersion(FirstArgument(argc, argv), "vm_supervisor", kHelp)) {
    return *answered;
  }
  const Options o = Parse(argc, argv);
  // The policy first, as root and before anything starts: a policy that does not read or
  // compile starts nothing, and qemu's child only loads the ready program (no allocation).
  std::vector<sock_filter> policy;
  if (!o.seccomp_policy.empty()) {
    absl::StatusOr<std::vector<sock_filter>> compiled = ReadQemuSeccompPolicy(o.seccomp_policy);
    if (!compiled.ok()) {
      std::fprintf(stderr, "vm_supervisor: --seccomp-policy: %s\n",
                   std::string(compiled.status().message()).c_str());
      return 1;
    }
    policy = *std::move(compiled);
  }
  signal(SIGPIPE, SIG_IGN);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return 1;
  pid_t sup = fork();
  if (sup < 0) return 1;
  if (sup == 0) {
    // Nothing of the caller's stays open: its standard streams become /dev/null (a caller
    // reading our output must see its end when the first process exits), the report pipe is
    // descriptor 3, every other descriptor is closed.
    setsid();
    int null = open("/dev/null", O_RDWR);
    if (null < 0 || dup2(report[1], 3) < 0) _exit(1);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    syscall(SYS_close_range, 4, ~0U, 0);
    _exit(Supervise(o, policy, 3));
  }
  close(report[1]);
  std::string got;
  char buf[512];
  for (;;) {
    ssize_t n = read(report[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  if (got == "1") return 0;
  // The supervisor failed before the VM ran: reap it (it has exited or is exiting).
  waitpid(sup, nullptr, 0);
  std::fprintf(stderr, "vm_supervisor: %s\n", got.empty() ? "the supervisor died" : got.c_str());
  return 1;
}

}  // namespace sn::microvm

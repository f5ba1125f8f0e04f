#include "privhelper/helpers/spawn.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sn::privhelper {
namespace {

// The child's steps, reported with errno when one fails.
enum class Step : int {
  kSignals = 1, kSession, kDescriptors, kLimits, kNoNewPrivs, kSecurebits, kBoundingSet,
  kAmbient, kCapset, kSeccomp, kExec,
};

const char* StepName(int step) {
  switch (static_cast<Step>(step)) {
    case Step::kSignals: return "signals";
    case Step::kSession: return "setsid";
    case Step::kDescriptors: return "descriptors";
    case Step::kLimits: return "rlimits";
    case Step::kNoNewPrivs: return "no_new_privs";
    case Step::kSecurebits: return "securebits";
    case Step::kBoundingSet: return "capability bounding set";
    case Step::kAmbient: return "ambient capabilities";
    case Step::kCapset: return "capset";
    case Step::kSeccomp: return "seccomp";
    case Step::kExec: return "execve";
  }
  return "unknown step";
}

constexpr unsigned long kSecurebits =
    SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
    SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
    SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

// Everything the child needs, prepared before fork (the child allocates nothing).
struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  int channel_fd;
  int extra_fd;
  int devnull_fd;
  int report_fd;  // close-on-exec pipe: a failing step writes {step, errno}
  struct Limit {
    int resource;
    rlim_t value;
  } limits[6];
  sock_fprog filter;
};

[[noreturn]] void ChildFail(const ChildPlan& p, Step step) {
  int report[2] = {static_cast<int>(step), errno};
  ssize_t unused = write(p.report_fd, report, sizeof report);
  (void)unused;
  _exit(127);
}

// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void Child(const ChildPlan& p) {
  sigset_t all;
  sigemptyset(&all);
  if (sigprocmask(SIG_SETMASK, &all, nullptr) != 0) ChildFail(p, Step::kSignals);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);  // EINVAL: glibc's own
  }
  if (setsid() < 0) ChildFail(p, Step::kSession);

  // Lift the descriptors out of 0..4 first so the dup2s below cannot overwrite one another.
  constexpr int kHigh = 10;
  int channel = fcntl(p.channel_fd, F_DUPFD_CLOEXEC, kHigh);
  int extra = p.extra_fd >= 0 ? fcntl(p.extra_fd, F_DUPFD_CLOEXEC, kHigh) : -1;
  int devnull = fcntl(p.devnull_fd, F_DUPFD_CLOEXEC, kHigh);
  int report = fcntl(p.report_fd, F_DUPFD_CLOEXEC, kHigh);
  if (channel < 0 || devnull < 0 || report < 0 || (p.extra_fd >= 0 && extra < 0)) {
    ChildFail(p, Step::kDescriptors);
  }
  ChildPlan q = p;
  q.report_fd = report;
  if (dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0) ChildFail(q, Step::kDescriptors);
  // No stderr in privhelper: /dev/null rather than a free slot the helper would reuse.
  if (fcntl(2, F_GETFD) < 0 && dup2(devnull, 2) < 0) ChildFail(q, Step::kDescriptors);
  if (dup2(channel, 3) < 0) ChildFail(q, Step::kDescriptors);  // dup2 clears close-on-exec
  if (extra >= 0 && dup2(extra, 4) < 0) ChildFail(q, Step::kDescriptors);
  const unsigned first_closed = extra >= 0 ? 5 : 4;
  // Everything else goes; the report pipe stays until execve closes it.
  if (static_cast<unsigned>(report) > first_closed &&
      syscall(SYS_close_range, first_closed, static_cast<unsigned>(report) - 1, 0) != 0) {
    ChildFail(q, Step::kDescriptors);
  }
  if (syscall(SYS_close_range, static_cast<unsigned>(report) + 1, ~0U, 0) != 0) {
    ChildFail(q, Step::kDescriptors);
  }

  for (const ChildPlan::Limit& l : p.limits) {
    rlimit r{l.value, l.value};
    if (setrlimit(l.resource, &r) != 0) ChildFail(q, Step::kLimits);
  }

  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(q, Step::kNoNewPrivs);
  if (prctl(PR_SET_SECUREBITS, kSecurebits, 0, 0, 0) != 0) ChildFail(q, Step::kSecurebits);
  for (int cap = 0; cap < 64; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;  // past the kernel's last capability
      ChildFail(q, Step::kBoundingSet);
    }
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) ChildFail(q, Step::kAmbient);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
  memset(data, 0, sizeof data);
  if (syscall(SYS_capset, &header, data) != 0) ChildFail(q, Step::kCapset);

  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p.filter) != 0) {
    ChildFail(q, Step::kSeccomp);
  }
  execve(p.path, p.argv, p.envp);
  ChildFail(q, Step::kExec);
}

}  // namespace

absl::StatusOr<pid_t> SpawnSandboxed(const SpawnSpec& spec) {
  if (spec.channel_fd < 0 || spec.filter.empty() || spec.argv.empty()) {
    return absl::InvalidArgumentError("spawn: channel, filter and argv are required");
  }
  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* envp[] = {nullptr};

  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) return absl::InternalError(absl::StrCat("open /dev/null: ", strerror(errno)));
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    close(devnull);
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }

  ChildPlan plan{};
  plan.path = spec.path.c_str();
  plan.argv = argv.data();
  plan.envp = envp;
  plan.channel_fd = spec.channel_fd;
  plan.extra_fd = spec.extra_fd;
  plan.devnull_fd = devnull;
  plan.report_fd = pipe_fds[1];
  const SandboxLimits& l = spec.limits;
  plan.limits[0] = {RLIMIT_NOFILE, l.open_files};
  plan.limits[1] = {RLIMIT_CORE, l.core_bytes};
  plan.limits[2] = {RLIMIT_AS, l.address_space_bytes};
  plan.limits[3] = {RLIMIT_STACK, l.stack_bytes};
  plan.limits[4] = {RLIMIT_MEMLOCK, l.locked_bytes};
  plan.limits[5] = {RLIMIT_MSGQUEUE, l.message_queue_bytes};
  plan.filter.len = static_cast<unsigned short>(spec.filter.size());
  plan.filter.filter = const_cast<sock_filter*>(spec.filter.data());

  // _Fork: fork without the atfork handlers (gRPC and others register some); the child runs
  // only the async-signal-safe code above.
  pid_t pid = _Fork();
  if (pid == 0) Child(plan);
  const int fork_errno = errno;
  close(pipe_fds[1]);
  close(devnull);
  if (pid < 0) {
    close(pipe_fds[0]);
    return absl::UnavailableError(absl::StrCat("fork: ", strerror(fork_errno)));
  }
  // EOF: the exec succeeded (close-on-exec closed the pipe). Otherwise {step, errno}.
  int report[2] = {0, 0};
  ssize_t got;
  do {
    got = read(pipe_fds[0], report, sizeof report);
  } while (got < 0 && errno == EINTR);
  close(pipe_fds[0]);
  if (got == 0) return pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof report)) {
    return absl::InternalError("spawn: the child failed without a report");
  }
  return absl::InternalError(absl::StrCat("spawn: ", StepName(report[0]), ": ",
                                          strerror(report[1])));
}

absl::Status CheckSandboxedStatus(std::string_view proc_status, int min_filters) {
  struct Want {
    const char* field;
    bool seen = false;
  } want[] = {{"NoNewPrivs"}, {"Seccomp"}, {"CapInh"}, {"CapPrm"}, {"CapEff"},
              {"CapBnd"},     {"CapAmb"}};
  for (absl::string_view line : absl::StrSplit(
           absl::string_view(proc_status.data(), proc_status.size()), '\n')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, ':');
    absl::string_view key = kv.first;
    absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    auto refuse = [&](absl::string_view expected) {
      return absl::FailedPreconditionError(
          absl::StrCat("helper status ", key, " is ", value, ", expected ", expected));
    };
    if (key == "Seccomp_filters") {
      int n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < min_filters) {
        return refuse(absl::StrCat(">= ", min_filters));
      }
      continue;
    }
    for (Want& w : want) {
      if (key != w.field) continue;
      w.seen = true;
      if (key == "NoNewPrivs" && value != "1") return refuse("1");
      if (key == "Seccomp" && value != "2") return refuse("2 (filter)");
      if (absl::StartsWith(key, "Cap") && value != "0000000000000000") return refuse("0");
    }
  }
  for (const Want& w : want) {
    if (!w.seen) {
      return absl::FailedPreconditionError(absl::StrCat("helper status lacks ", w.field));
    }
  }
  return absl::OkStatus();
}

}  // namespace sn::privhelper

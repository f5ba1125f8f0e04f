#include "privhelper/native/microvm/guest/process.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace sn::guest {
namespace {

using v1::FromGuest;

constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Everything the sandbox's process needs to start, prepared before it is spawned: the child of
// vfork shares this process's memory until its execve, so it only makes system calls on these
// bytes (no allocation, no lock, no library state; docs/architecture.md, the guest agent's row).
// Under TCG a fork is costly: the guest kernel copies the agent's page tables and both
// processes then take copy-on-write faults, each an emulated exception; vfork does neither.
struct SpawnPlan {
  std::string root;
  int in = -1, out = -1, err = -1;
  std::vector<std::string> vars;         // the sandbox's environment, PATH always set
  std::vector<char*> envp;
  std::vector<std::string> args;
  std::vector<char*> argv;
  std::vector<std::string> candidates;   // the paths execve tries, in order (execvpe's search)
  std::vector<char*> sh_argv;            // ENOEXEC: /bin/sh <candidate> argv[1..]
  // Set by the child when it exits without its execve (the parent reads them once vfork
  // returns, when the child is gone): the errno and the step that failed.
  int failed_errno = 0;
  const char* failed_step = nullptr;
};

// Builds the plan: the environment (PATH defaults to kDefaultPath), argv, and execvpe's search
// of the sandbox's PATH, done here by name because the child may not call execvpe (it reads
// the caller's environment) nor allocate: a name with a '/' is tried as it is; otherwise each
// PATH entry in order, an empty entry meaning the current directory (the sandbox root).
void Plan(const std::string& root, const google::protobuf::RepeatedPtrField<std::string>& argv,
          const google::protobuf::Map<std::string, std::string>& env, SpawnPlan* plan) {
  plan->root = root;
  std::string path = kDefaultPath;
  bool has_path = false;
  for (const auto& [k, v] : env) {
    plan->vars.push_back(k + "=" + v);
    if (k == "PATH") {
      has_path = true;
      path = v;
    }
  }
  if (!has_path) plan->vars.push_back(std::string("PATH=") + kDefaultPath);
  for (std::string& v : plan->vars) plan->envp.push_back(v.data());
  plan->envp.push_back(nullptr);
  plan->args.assign(argv.begin(), argv.end());
  for (std::string& a : plan->args) plan->argv.push_back(a.data());
  plan->argv.push_back(nullptr);
  const std::string& file = plan->args[0];
  if (file.empty()) {
    // execve("") fails with ENOENT: one candidate that cannot exist.
    plan->candidates.push_back("");
  } else if (file.find('/') != std::string::npos) {
    plan->candidates.push_back(file);
  } else {
    size_t begin = 0;
    while (true) {
      const size_t end = std::min(path.find(':', begin), path.size());
      const std::string dir = path.substr(begin, end - begin);
      plan->candidates.push_back(dir.empty() ? file : dir + "/" + file);
      if (end == path.size()) break;
      begin = end + 1;
    }
  }
  plan->sh_argv.push_back(const_cast<char*>("/bin/sh"));
  plan->sh_argv.push_back(nullptr);  // the candidate, set by the child
  for (size_t i = 1; i < plan->args.size(); ++i) plan->sh_argv.push_back(plan->args[i].data());
  plan->sh_argv.push_back(nullptr);
}

[[noreturn]] void Fail(SpawnPlan& plan, const char* step, int e, int code) {
  plan.failed_step = step;
  plan.failed_errno = e;
  _exit(code);
}

// The child of vfork: system calls only, on the plan's bytes. Never returns.
[[noreturn]] __attribute__((noinline)) void SpawnChild(SpawnPlan& plan) {
  signal(SIGPIPE, SIG_DFL);  // ignored in the agent; dispositions are this child's own copy
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setsid();
  if (plan.root != "/" && (chroot(plan.root.c_str()) != 0 || chdir("/") != 0)) {
    Fail(plan, "chroot", errno, 126);
  }
  if (dup2(plan.in, 0) < 0 || dup2(plan.out, 1) < 0 || dup2(plan.err, 2) < 0) {
    Fail(plan, "dup2", errno, 126);
  }
  // execvpe's rules (glibc posix/execvpe.c): EACCES is remembered and the search goes on, as
  // it does past a name that is not there; any other error ends it; a file the kernel cannot
  // execute (ENOEXEC) is run by /bin/sh.
  bool eacces = false;
  int e = ENOENT;
  for (std::string& candidate : plan.candidates) {
    execve(candidate.c_str(), plan.argv.data(), plan.envp.data());
    e = errno;
    if (e == ENOEXEC) {
      plan.sh_argv[1] = candidate.data();
      execve(plan.sh_argv[0], plan.sh_argv.data(), plan.envp.data());
      e = errno;
    }
    if (e == EACCES) {
      eacces = true;
      continue;
    }
    if (e == ENOENT || e == ESTALE || e == ENOTDIR || e == ENODEV || e == ETIMEDOUT) continue;
    break;
  }
  if (eacces && (e == ENOENT || e == ESTALE || e == ENOTDIR || e == ENODEV || e == ETIMEDOUT)) {
    e = EACCES;
  }
  Fail(plan, "exec", e, e == ENOENT ? 127 : 126);
}

// Spawns the plan's process: its pid, or -1 (errno set). The function that calls vfork holds
// nothing the child could clobber.
pid_t Spawn(SpawnPlan& plan) {
  const pid_t pid = vfork();
  if (pid == 0) SpawnChild(plan);
  return pid;
}

// What a failed start says on the process's stderr: "<argv[0]>: <error>" when its execve
// failed, as a shell says it; nothing for an earlier step (the exit code, 126, says it).
std::string SpawnFailure(const SpawnPlan& plan) {
  if (plan.failed_step == nullptr || std::strcmp(plan.failed_step, "exec") != 0) return "";
  return plan.args[0] + ": " + std::strerror(plan.failed_errno) + "\n";
}

struct Pipes {
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  bool Open() {
    return pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0;
  }
  void CloseAll() {
    for (int* p : {in, out, err}) {
      for (int i = 0; i < 2; ++i) {
        if (p[i] >= 0) close(p[i]);
        p[i] = -1;
      }
    }
  }
};

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Collects both streams into `result` within `limit` bytes together.
class Output {
 public:
  Output(v1::ExecResult* r, int64_t limit) : r_(r), left_(static_cast<size_t>(std::max<int64_t>(limit, 0))) {}
  void Take(bool is_err, const char* p, size_t n) {
    const size_t keep = std::min(n, left_);
    (is_err ? r_->mutable_stderr() : r_->mutable_stdout())->append(p, keep);
    left_ -= keep;
    if (keep < n) r_->set_truncated(true);
  }

 private:
  v1::ExecResult* r_;
  size_t left_;
};

int ExitCodeOf(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return info.si_status & 0xff;
  return 128 + info.si_status;
}

}  // namespace

FromGuest ErrorAnswer(v1::ErrorCode code, std::string message) {
  FromGuest a;
  a.mutable_error()->set_code(code);
  if (message.size() > 256) message.resize(256);
  a.mutable_error()->set_message(std::move(message));
  return a;
}

FromGuest RunExec(const std::string& root, const v1::Exec& exec) {
  if (exec.argv().empty()) return ErrorAnswer(v1::ERROR_INVALID, "empty argv");
  Pipes p;
  if (!p.Open()) {
    p.CloseAll();
    return ErrorAnswer(v1::ERROR_FAILED, std::string("pipe: ") + std::strerror(errno));
  }
  SpawnPlan plan;
  Plan(root, exec.argv(), exec.env(), &plan);
  plan.in = p.in[0];
  plan.out = p.out[1];
  plan.err = p.err[1];
  const pid_t pid = Spawn(plan);
  if (pid < 0) {
    p.CloseAll();
    return ErrorAnswer(v1::ERROR_FAILED, std::string("vfork: ") + std::strerror(errno));
  }
  CloseFd(p.in[0]);
  CloseFd(p.out[1]);
  CloseFd(p.err[1]);
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  for (int fd : {p.in[1], p.out[0], p.err[0]}) fcntl(fd, F_SETFL, O_NONBLOCK);

  FromGuest answer;
  v1::ExecResult* result = answer.mutable_exec();
  Output output(result, exec.output_limit_bytes());
  const std::string failure = SpawnFailure(plan);
  output.Take(true, failure.data(), failure.size());
  const std::string& input = exec.stdin();
  size_t written = 0;
  if (input.empty()) CloseFd(p.in[1]);
  const int64_t deadline = exec.timeout_ms() > 0 ? NowMs() + exec.timeout_ms() : -1;
  bool exited = false;
  siginfo_t info{};
  int64_t drain_until = -1;  // after the exit: what is already in the pipes, briefly
  std::vector<char> buf(64 * 1024);
  while (p.out[0] >= 0 || p.err[0] >= 0 || !exited) {
    const int64_t now = NowMs();
    if (deadline >= 0 && now >= deadline && !exited) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
    }
    if (exited && (drain_until < 0 || now >= drain_until)) break;
    pollfd fds[4] = {{p.out[0], POLLIN, 0}, {p.err[0], POLLIN, 0},
                     {written < input.size() ? p.in[1] : -1, POLLOUT, 0},
                     {exited ? -1 : pidfd, POLLIN, 0}};
    int wait_ms = 1000;
    if (deadline >= 0 && !exited) wait_ms = static_cast<int>(std::clamp<int64_t>(deadline - now, 0, 1000));
    if (exited) wait_ms = static_cast<int>(std::max<int64_t>(drain_until - now, 0));
    if (poll(fds, 4, wait_ms) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? p.out[0] : p.err[0];
      if (fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t n = read(fd, buf.data(), buf.size());
      if (n > 0) output.Take(i == 1, buf.data(), static_cast<size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) CloseFd(fd);
    }
    if (p.in[1] >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      ssize_t n = write(p.in[1], input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) CloseFd(p.in[1]);
    }
    if (!exited && (pidfd < 0 || (fds[3].revents & POLLIN) != 0)) {
      if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | (pidfd < 0 ? WNOHANG : 0)) == 0 &&
          info.si_pid == pid) {
        exited = true;
        drain_until = NowMs() + 100;
      }
    }
  }
  if (!exited) {
    kill(-pid, SIGKILL);
    waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED);
  }
  CloseFd(pidfd);
  p.CloseAll();
  result->set_exit_code(ExitCodeOf(info));
  return answer;
}

absl::StatusOr<pid_t> StartMain(const std::string& root, const v1::Start& start) {
  if (start.argv().empty()) return absl::InvalidArgumentError("empty argv");
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) return absl::InternalError(std::string("/dev/null: ") + std::strerror(errno));
  SpawnPlan plan;
  Plan(root, start.argv(), start.env(), &plan);
  plan.in = plan.out = plan.err = null;
  const pid_t pid = Spawn(plan);
  const int e = errno;
  close(null);
  if (pid < 0) return absl::InternalError(std::string("vfork: ") + std::strerror(e));
  // A main process whose execve failed has exited (127 or 126): it is reaped and reported as
  // any main process that ends.
  return pid;
}

namespace {

// Opens `path` inside root_fd: absolute or relative, every symlink resolved inside the root.
int OpenIn(int root_fd, const std::string& path, uint64_t flags, uint64_t mode) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how)));
}

FromGuest ErrnoAnswer(int err, const std::string& what) {
  const v1::ErrorCode code = err == ENOENT    ? v1::ERROR_NOT_FOUND
                             : err == ENOTDIR ? v1::ERROR_CONFLICT
                                              : v1::ERROR_FAILED;
  return ErrorAnswer(code, what + ": " + std::strerror(err));
}

}  // namespace

FromGuest WriteFileIn(int root_fd, const v1::WriteFile& w) {
  if (w.path().empty() || w.mode() > 0777) return ErrorAnswer(v1::ERROR_INVALID, "path or mode");
  int fd = OpenIn(root_fd, w.path(), O_WRONLY | O_CREAT | O_TRUNC, w.mode());
  if (fd < 0) return ErrnoAnswer(errno, "open");
  size_t done = 0;
  const std::string& c = w.content();
  while (done < c.size()) {
    ssize_t n = write(fd, c.data() + done, c.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      close(fd);
      return ErrnoAnswer(e, "write");
    }
    done += static_cast<size_t>(n);
  }
  if (fchmod(fd, w.mode()) != 0 || close(fd) != 0) return ErrnoAnswer(errno, "close");
  FromGuest a;
  a.mutable_write_file()->set_size(static_cast<int64_t>(c.size()));
  return a;
}

FromGuest ReadFileIn(int root_fd, const v1::ReadFile& r) {
  if (r.path().empty() || r.max_bytes() < 0) return ErrorAnswer(v1::ERROR_INVALID, "path");
  int fd = OpenIn(root_fd, r.path(), O_RDONLY, 0);
  if (fd < 0) return ErrnoAnswer(errno, "open");
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return ErrorAnswer(v1::ERROR_FAILED, "not a regular file");
  }
  FromGuest a;
  v1::ReadFileResult* out = a.mutable_read_file();
  const size_t want = static_cast<size_t>(std::min<int64_t>(r.max_bytes(), st.st_size));
  std::string* content = out->mutable_content();
  content->resize(want);
  size_t got = 0;
  while (got < want) {
    ssize_t n = read(fd, content->data() + got, want - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  content->resize(got);
  // A file that shrank while it was read: its size is what was there.
  const int64_t size = got < want ? static_cast<int64_t>(got) : static_cast<int64_t>(st.st_size);
  out->set_size(size);
  out->set_truncated(size > static_cast<int64_t>(got));
  return a;
}

}  // namespace sn::guest

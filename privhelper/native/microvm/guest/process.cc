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

// In the child, after fork: the sandbox's process image. Never returns.
[[noreturn]] void ExecChild(const std::string& root, const google::protobuf::RepeatedPtrField<std::string>& argv,
                            const google::protobuf::Map<std::string, std::string>& env, int in,
                            int out, int err) {
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setsid();
  if (root != "/" && (chroot(root.c_str()) != 0 || chdir("/") != 0)) _exit(126);
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
  std::vector<std::string> vars;
  bool path = false;
  for (const auto& [k, v] : env) {
    vars.push_back(k + "=" + v);
    if (k == "PATH") path = true;
  }
  if (!path) vars.push_back(std::string("PATH=") + kDefaultPath);
  std::vector<char*> envp;
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<std::string> args(argv.begin(), argv.end());
  std::vector<char*> av;
  for (std::string& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  // execvpe searches the caller's PATH: make it the sandbox's.
  for (const std::string& v : vars) {
    if (v.rfind("PATH=", 0) == 0) setenv("PATH", v.c_str() + 5, 1);
  }
  execvpe(av[0], av.data(), envp.data());
  const int e = errno;
  const std::string msg = std::string(av[0]) + ": " + std::strerror(e) + "\n";
  (void)!write(2, msg.data(), msg.size());
  _exit(e == ENOENT ? 127 : 126);
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
  pid_t pid = fork();
  if (pid < 0) {
    p.CloseAll();
    return ErrorAnswer(v1::ERROR_FAILED, std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) ExecChild(root, exec.argv(), exec.env(), p.in[0], p.out[1], p.err[1]);
  CloseFd(p.in[0]);
  CloseFd(p.out[1]);
  CloseFd(p.err[1]);
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  for (int fd : {p.in[1], p.out[0], p.err[0]}) fcntl(fd, F_SETFL, O_NONBLOCK);

  FromGuest answer;
  v1::ExecResult* result = answer.mutable_exec();
  Output output(result, exec.output_limit_bytes());
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
  pid_t pid = fork();
  if (pid == 0) ExecChild(root, start.argv(), start.env(), null, null, null);
  close(null);
  if (pid < 0) return absl::InternalError(std::string("fork: ") + std::strerror(errno));
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

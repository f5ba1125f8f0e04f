// sandbox_probe ACTION [ARG]: run by spawn_test through privhelper's sandboxed spawn path
// (the same one the native helper takes). It reports on fd 3, one "key=value" line per fact,
// then exits 0; a call the filter kills never reports (the test sees SIGSYS instead).
//   report            descriptors 0..1023 that are open, environment size, rlimits, and the
//                     privilege lines of /proc/self/status
//   open_write PATH   open(PATH, O_CREAT|O_WRONLY)      socket_inet / socket_unix
//   unlink PATH       (killed)   ptrace (killed)   unshare (killed)   clone3 (ENOSYS)
//   serving ACTION    installs the helper's kServing filter first, then ACTION among
//                     fork, thread, open_read, exec (killed), mmap_exec, signal_parent
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "privhelper/native/seccomp_policy.h"

#include "privhelper/helpers/sanitizer_build.h"

// In sanitizer builds (tests only) LeakSanitizer would stop the world with ptrace at exit,
// which the seccomp filters forbid: leaks are checked in the in-process unit tests instead.
#ifdef SN_ASAN_BUILD
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

extern char** environ;

namespace {

void Report(const std::string& line) {
  std::string l = line + "\n";
  ssize_t unused = write(3, l.data(), l.size());
  (void)unused;
}

void ReportCall(const char* what, long rc) {
  Report(std::string(what) + "=" + std::to_string(rc) + " errno=" + std::to_string(rc < 0 ? errno : 0));
}

std::string Limit(int resource) {
  rlimit r{};
  getrlimit(resource, &r);
  return std::to_string(r.rlim_cur) + "/" + std::to_string(r.rlim_max);
}

int ReportState() {
  std::string fds;
  for (int fd = 0; fd < 1024; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0) fds += (fds.empty() ? "" : ",") + std::to_string(fd);
  }
  Report("fds=" + fds);
  int env = 0;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) ++env;
  Report("env=" + std::to_string(env));
  Report("nofile=" + Limit(RLIMIT_NOFILE));
  Report("core=" + Limit(RLIMIT_CORE));
  Report("as=" + Limit(RLIMIT_AS));
  Report("sigmask_blocked=" + std::to_string([] {
           sigset_t s;
           sigprocmask(SIG_SETMASK, nullptr, &s);
           return sigismember(&s, SIGTERM);
         }()));
  FILE* f = fopen("/proc/self/status", "r");
  if (f == nullptr) return 1;
  char line[512];
  while (fgets(line, sizeof line, f) != nullptr) {
    std::string l(line);
    if (l.rfind("Cap", 0) == 0 || l.rfind("NoNewPrivs", 0) == 0 || l.rfind("Seccomp", 0) == 0) {
      l.pop_back();
      Report("status " + l);
    }
  }
  fclose(f);
  return 0;
}

int Serving(const std::string& action) {
  if (!sn::native::InstallServingFilter("docker").ok()) return 3;
  Report("serving=1");
  if (action == "fork") {
    pid_t p = fork();
    if (p == 0) _exit(0);
    if (p > 0) waitpid(p, nullptr, 0);
    ReportCall("fork", p);
  } else if (action == "thread") {
    bool ran = false;
    std::thread([&ran] { ran = true; }).join();
    Report(std::string("thread=") + (ran ? "1" : "0"));
  } else if (action == "open_read") {
    ReportCall("open_read", open("/proc/self/status", O_RDONLY | O_CLOEXEC));
  } else if (action == "exec") {
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    ReportCall("exec", execve("/bin/true", argv, environ));
  } else if (action == "mmap_exec") {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ReportCall("mmap_exec", p == MAP_FAILED ? -1 : 0);
  } else if (action == "signal_parent") {
    ReportCall("signal_parent", kill(getppid(), 0));  // signal 0: a permission check only
  } else {
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string action = argv[1];
  const char* arg = argc > 2 ? argv[2] : "";
  if (action == "report") return ReportState();
  if (action == "open_write") {
    ReportCall("open_write", open(arg, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  } else if (action == "socket_inet") {
    ReportCall("socket_inet", socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  } else if (action == "socket_unix") {
    ReportCall("socket_unix", socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  } else if (action == "unlink") {
    ReportCall("unlink", unlink(arg));
  } else if (action == "ptrace") {
    ReportCall("ptrace", ptrace(PTRACE_TRACEME, 0, nullptr, nullptr));
  } else if (action == "unshare") {
    ReportCall("unshare", unshare(CLONE_NEWUSER));
  } else if (action == "clone3") {
    ReportCall("clone3", syscall(SYS_clone3, nullptr, 0));
  } else if (action == "serving") {
    return Serving(arg);
  } else {
    return 2;
  }
  return 0;
}

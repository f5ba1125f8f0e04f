#include "tools/install/system.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"

namespace sn::install {
namespace {

constexpr char kPath[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";

std::optional<SystemUser> Lookup(const std::string& name) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* result = nullptr;
  if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &result) != 0 || !result) {
    return std::nullopt;
  }
  return SystemUser{pw.pw_uid, pw.pw_gid, false};
}

// In a child: drop to uid/gid. Returns false on failure (errno set).
bool DropTo(uid_t uid, gid_t gid) {
  return setgroups(0, nullptr) == 0 && setgid(gid) == 0 && setuid(uid) == 0 && chdir("/") == 0;
}

std::vector<char*> Argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const std::string& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

int ExitOf(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 255;
}

}  // namespace

absl::StatusOr<SystemUser> EnsureSystemUser(const std::string& name) {
  std::optional<SystemUser> user = Lookup(name);
  if (!user.has_value()) {
    absl::StatusOr<int> rc =
        RunCommand({"/usr/sbin/useradd", "--system", "--user-group", "--no-create-home",
                    "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name});
    if (!rc.ok()) return rc.status();
    if (*rc != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("useradd of the system user ", name, " exited with ", *rc));
    }
    user = Lookup(name);
    if (!user.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat("useradd did not create user ", name));
    }
    user->created = true;
  }
  if (user->uid == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the user ", name, " is uid 0; neither the agent nor qemu may run as root"));
  }
  return *user;
}

std::optional<gid_t> GroupId(const std::string& name) {
  std::vector<char> buf(16384);
  group gr{};
  group* result = nullptr;
  if (getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &result) != 0 || !result) {
    return std::nullopt;
  }
  return gr.gr_gid;
}

absl::Status RunAs(uid_t uid, gid_t gid, const std::function<absl::Status()>& fn) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return ErrnoStatus(errno, "fork");
  }
  if (pid == 0) {
    close(pipefd[0]);
    std::string message;
    if (!DropTo(uid, gid)) {
      message = absl::StrCat("cannot take the agent user's credentials: ", strerror(errno));
    } else {
      absl::Status s = fn();
      if (!s.ok()) message = std::string(s.message());
    }
    if (!message.empty()) {
      ssize_t ignored = write(pipefd[1], message.data(), message.size());
      (void)ignored;
    }
    _exit(message.empty() ? 0 : 1);
  }
  close(pipefd[1]);
  std::string message;
  char buf[1024];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) message.append(buf, static_cast<size_t>(n));
  }
  close(pipefd[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (ExitOf(wstatus) == 0) return absl::OkStatus();
  if (message.empty()) message = absl::StrCat("exit status ", ExitOf(wstatus));
  return absl::FailedPreconditionError(absl::StrCat("as the agent's user: ", message));
}

absl::StatusOr<int> RunCommand(const std::vector<std::string>& argv,
                               std::optional<std::pair<uid_t, gid_t>> as) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus(errno, "fork");
  if (pid == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO);
    if (as.has_value() && !DropTo(as->first, as->second)) _exit(126);
    std::vector<char*> args = Argv(argv);
    char* env[] = {const_cast<char*>(kPath), nullptr};
    execve(args[0], args.data(), env);
    _exit(127);
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus(errno, "waitpid");
  }
  const int rc = ExitOf(wstatus);
  if (rc == 127) {
    return absl::FailedPreconditionError(absl::StrCat("cannot execute ", argv[0]));
  }
  return rc;
}

absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log) {
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus(errno, "open " + log);
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd);
    return ErrnoStatus(errno, "fork");
  }
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    std::vector<char*> args = Argv(argv);
    char* env[] = {const_cast<char*>(kPath), nullptr};
    execve(args[0], args.data(), env);
    _exit(127);
  }
  close(fd);
  return pid;
}

bool ChildAlive(pid_t pid) {
  int wstatus = 0;
  return waitpid(pid, &wstatus, WNOHANG) == 0;
}

void StopChild(pid_t pid, absl::Duration grace) {
  kill(pid, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  int wstatus = 0;
  while (absl::Now() < deadline) {
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return;
    usleep(50 * 1000);
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
}

bool SystemdIsPid1() {
  struct stat st;
  return lstat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

absl::Status TakeInstallLock(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "open " + path);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat("another sandbox-node-install holds ", path, "; let it finish"));
    }
    return ErrnoStatus(err, "flock " + path);
  }
  return absl::OkStatus();  // the descriptor stays open (and locked) until exit
}

}  // namespace sn::install

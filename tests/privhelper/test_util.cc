#include "tests/privhelper/test_util.h"

#include <grp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace sn::testing {

bool InCi() {
  const char* ci = getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

ShortTempDir::ShortTempDir() {
  char tmpl[] = "/tmp/x-XXXXXX";
  char* p = mkdtemp(tmpl);
  if (p != nullptr) {
    path_ = p;
    chmod(p, 0755);
  }
}

ShortTempDir::~ShortTempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

int RunAsUser(uid_t uid, gid_t gid, const std::function<int()>& fn) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(250);
    _exit(fn());
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (!WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

CannedHttpServer::CannedHttpServer(const std::string& path, std::string answer)
    : path_(path), answer_(std::move(answer)) {
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  listen(listen_fd_, 16);
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { Loop(); });
}

CannedHttpServer::~CannedHttpServer() {
  uint64_t one = 1;
  ssize_t unused = write(wake_fd_, &one, sizeof one);
  (void)unused;
  thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  unlink(path_.c_str());
}

int CannedHttpServer::connections() const {
  absl::MutexLock lock(&mu_);
  return connections_;
}

void CannedHttpServer::Loop() {
  std::vector<int> silent;  // connections kept open without an answer
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents != 0) break;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    {
      absl::MutexLock lock(&mu_);
      ++connections_;
    }
    if (answer_.empty()) {
      silent.push_back(fd);
      continue;
    }
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    size_t off = 0;
    while (off < answer_.size()) {
      ssize_t n = write(fd, answer_.data() + off, answer_.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(fd);
  }
  for (int fd : silent) close(fd);
}

absl::StatusOr<docker::HttpResponse> FakeEngine::Request(std::string_view, std::string_view target,
                                                         std::string_view,
                                                         const docker::RequestOptions&) {
  targets.emplace_back(target);
  if (script_.empty()) return absl::InternalError("fake engine: script exhausted");
  absl::StatusOr<docker::HttpResponse> r = std::move(script_.front());
  script_.pop_front();
  return r;
}

}  // namespace sn::testing

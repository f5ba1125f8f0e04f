#include "tests/privhelper/test_util.h"

#include <grp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

CannedHttpServer::CannedHttpServer(const std::string& path, std::string answer, Mode mode)
    : path_(path), answer_(std::move(answer)), mode_(mode) {
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

std::vector<std::string> CannedHttpServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

void CannedHttpServer::Loop() {
  // Open connections with what each has sent and not yet been answered.
  std::vector<std::pair<int, std::string>> conns;
  for (;;) {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    for (const auto& c : conns) fds.push_back({c.first, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
    if (fds[1].revents != 0) break;
    if (fds[0].revents != 0) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        absl::MutexLock lock(&mu_);
        ++connections_;
        conns.emplace_back(fd, "");
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto& [fd, pending] = conns[i - 2];
      char buf[4096];
      ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) {
        close(fd);
        fd = -1;
        continue;
      }
      pending.append(buf, static_cast<size_t>(n));
      size_t end;
      // Requests without bodies are all these tests send on kept connections; a body on a
      // closing connection is simply left unread.
      while (fd >= 0 && (end = pending.find("\r\n\r\n")) != std::string::npos) {
        {
          absl::MutexLock lock(&mu_);
          requests_.push_back(pending.substr(0, end));
        }
        pending.erase(0, end + 4);
        if (answer_.empty()) break;  // silent: never answer
        size_t off = 0;
        while (off < answer_.size()) {
          ssize_t w = write(fd, answer_.data() + off, answer_.size() - off);
          if (w <= 0) break;
          off += static_cast<size_t>(w);
        }
        if (mode_ == Mode::kClose) {
          close(fd);
          fd = -1;
        }
      }
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(),
                               [](const auto& c) { return c.first < 0; }),
                conns.end());
  }
  for (const auto& c : conns) close(c.first);
}

absl::StatusOr<docker::HttpResponse> FakeEngine::Request(std::string_view, std::string_view target,
                                                         std::string_view body,
                                                         const docker::RequestOptions& options) {
  targets.emplace_back(target);
  std::string all(body);
  for (std::string_view part : options.body_parts) all.append(part.data(), part.size());
  bodies.push_back(std::move(all));
  if (script_.empty()) return absl::InternalError("fake engine: script exhausted");
  absl::StatusOr<docker::HttpResponse> r = std::move(script_.front());
  script_.pop_front();
  return r;
}

}  // namespace sn::testing

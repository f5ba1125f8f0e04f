// A tiny HTTP/1.1 "Core" for the installer's network-child tests (fetcher_test.cc): it answers
// each request with the canned response its path starts with, then closes the connection.
// It runs in a forked process, not a thread: Fetcher::Start requires a single-threaded
// caller (its child runs the HTTP client after fork()). The listening socket is bound to
// 127.0.0.1 port 0 before the fork, so the port is known and nothing waits for a start.
#ifndef SANDBOX_NODE_TESTS_INSTALL_HOSTILE_CORE_H_
#define SANDBOX_NODE_TESTS_INSTALL_HOSTILE_CORE_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sn::install::testing {

struct Canned {
  std::string path_prefix;
  int status = 200;
  std::string body;
};

class HostileCore {
 public:
  explicit HostileCore(std::vector<Canned> routes) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listener_, 16) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    pid_ = fork();
    if (pid_ == 0) Serve(routes);
    close(listener_);
  }
  ~HostileCore() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status;
      waitpid(pid_, &status, 0);
    }
  }
  bool ok() const { return pid_ > 0; }
  std::string origin() const { return absl::StrCat("http://127.0.0.1:", port_); }

 private:
  [[noreturn]] void Serve(const std::vector<Canned>& routes) {
    for (;;) {
      int c = accept(listener_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      // "GET /path HTTP/1.1": the request's body (a POST's) is never needed.
      const size_t sp = req.find(' ');
      const std::string path = req.substr(sp + 1, req.find(' ', sp + 1) - sp - 1);
      const Canned* hit = nullptr;
      for (const Canned& r : routes) {
        if (absl::StartsWith(path, r.path_prefix)) {
          hit = &r;
          break;
        }
      }
      const int status = hit ? hit->status : 404;
      const std::string& body = hit ? hit->body : std::string();
      std::string head = absl::StrCat("HTTP/1.1 ", status, " X\r\nContent-Length: ", body.size(),
                                      "\r\nContent-Type: application/json\r\n"
                                      "Connection: close\r\n\r\n");
      WriteAll(c, head);
      WriteAll(c, body);
      shutdown(c, SHUT_WR);
      while (read(c, buf, sizeof buf) > 0) {
      }
      close(c);
    }
  }
  static void WriteAll(int fd, std::string_view s) {
    while (!s.empty()) {
      ssize_t n = send(fd, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      s.remove_prefix(static_cast<size_t>(n));
    }
  }

  int listener_ = -1;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace sn::install::testing

#endif  // SANDBOX_NODE_TESTS_INSTALL_HOSTILE_CORE_H_

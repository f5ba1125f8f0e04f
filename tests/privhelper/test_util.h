// Helpers for privhelper tests: short temp dirs, root/dockerd gating, uid-switching children,
// a canned-answer HTTP server on a unix socket, and a fake DockerEngine.
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_TEST_UTIL_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_TEST_UTIL_H_

#include <sys/types.h>

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "privhelper/docker/engine.h"

namespace sn::testing {

// True when CI=true: tests that need root or dockerd must then run (or fail), never skip.
bool InCi();

// A short directory under /tmp (unix socket paths are limited to 107 bytes), mode 0755,
// removed recursively on destruction.
class ShortTempDir {
 public:
  ShortTempDir();
  ~ShortTempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs `fn` in a forked child after dropping to (uid, gid) with no supplementary groups;
// returns the child's exit status (0..255), or -1 when the child died otherwise, or 250 when
// the uid switch failed. REQUIRES: root. `fn` must only use async-signal-safe calls unless the
// calling process is single-threaded.
int RunAsUser(uid_t uid, gid_t gid, const std::function<int()>& fn);

// Serves every connection on a unix socket with one canned raw answer (written after the
// request header arrives), or with silence when `answer` is empty (the peer times out).
class CannedHttpServer {
 public:
  enum class Mode {
    kClose,      // one answer per connection, then close (the default)
    kKeepAlive,  // answer every request on a connection until the client closes it
  };
  CannedHttpServer(const std::string& path, std::string answer, Mode mode = Mode::kClose);
  ~CannedHttpServer();
  int connections() const;
  // The request heads received so far (request line and headers), in arrival order.
  std::vector<std::string> requests() const;

 private:
  void Loop();
  const std::string path_;
  const std::string answer_;
  const Mode mode_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  mutable absl::Mutex mu_;
  int connections_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> requests_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Answers Request() calls from a queue of scripted results, recording the targets asked for.
class FakeEngine final : public docker::DockerEngine {
 public:
  void Push(absl::StatusOr<docker::HttpResponse> r) { script_.push_back(std::move(r)); }
  void PushOk(int status, std::string body) {
    docker::HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    script_.push_back(std::move(r));
  }
  absl::StatusOr<docker::HttpResponse> Request(std::string_view method, std::string_view target,
                                               std::string_view body,
                                               const docker::RequestOptions& options) override;
  absl::StatusOr<docker::HttpResponse> Hijack(std::string_view, std::string_view, std::string_view,
                                              std::string_view, bool,
                                              const std::function<bool(std::string_view)>&,
                                              const docker::RequestOptions&) override {
    return absl::UnimplementedError("fake engine: no hijack");
  }
  std::deque<std::string> targets;
  std::deque<std::string> bodies;  // the request bodies (body_parts joined), beside `targets`

 private:
  std::deque<absl::StatusOr<docker::HttpResponse>> script_;
};

}  // namespace sn::testing

// Skips loudly unless running as root; under CI=true a missing root fails instead.
#define SN_REQUIRE_ROOT()                                                          \
  do {                                                                             \
    if (geteuid() != 0) {                                                          \
      if (::sn::testing::InCi()) FAIL() << "this test needs root (CI=true)";       \
      GTEST_SKIP() << "SKIPPED LOUDLY: this test needs root (set CI=true to fail)"; \
    }                                                                              \
  } while (0)

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_TEST_UTIL_H_

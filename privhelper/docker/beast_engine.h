// DockerEngine over the daemon's unix socket with Boost.Beast HTTP/1.1, one deadline for the
// whole exchange. GET requests keep their connection open afterwards (HTTP/1.1 keep-alive)
// and later GETs reuse it; a kept connection the daemon closed before answering is retried
// once on a new connection. Every other method gets a new connection with "Connection:
// close", so a mutation is never written twice. Sockets are close-on-exec.
#ifndef SANDBOX_NODE_PRIVHELPER_DOCKER_BEAST_ENGINE_H_
#define SANDBOX_NODE_PRIVHELPER_DOCKER_BEAST_ENGINE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "privhelper/docker/engine.h"

namespace sn::docker {

class BeastDockerEngine final : public DockerEngine {
 public:
  // `socket_path`: e.g. "/var/run/docker.sock". Nothing is opened until Request().
  explicit BeastDockerEngine(std::string socket_path);
  ~BeastDockerEngine() override;
  BeastDockerEngine(const BeastDockerEngine&) = delete;
  BeastDockerEngine& operator=(const BeastDockerEngine&) = delete;

  // At most this many idle kept connections; more are closed after their answer.
  static constexpr size_t kMaxIdleConnections = 4;

  absl::StatusOr<HttpResponse> Request(std::string_view method, std::string_view target,
                                       std::string_view body,
                                       const RequestOptions& options) override;
  absl::StatusOr<HttpResponse> Hijack(std::string_view method, std::string_view target,
                                      std::string_view body, std::string_view input,
                                      bool close_input,
                                      const std::function<bool(std::string_view)>& sink,
                                      const RequestOptions& options) override;

 // Idle kept connections now (for tests).
  size_t idle_connections() const;

 private:
  using http_verb_t = int;  // boost::beast::http::verb, kept out of this header
  // One request on kept connection `fd`, or on a new connection when fd < 0. For a kept
  // connection, sets *unanswered when it failed before any byte of an answer arrived.
  absl::StatusOr<HttpResponse> Exchange(int fd, http_verb_t verb, std::string_view target,
                                        std::string_view body, const RequestOptions& options,
                                        absl::Time deadline, bool* unanswered);
  absl::StatusOr<HttpResponse> HijackUnguarded(std::string_view method, std::string_view target,
                                               std::string_view body, std::string_view input,
                                               bool close_input,
                                               const std::function<bool(std::string_view)>& sink,
                                               const RequestOptions& options);
  int TakeIdle();
  void PutIdle(int fd);

  const std::string socket_path_;
  mutable absl::Mutex idle_mu_;
  std::vector<int> idle_ ABSL_GUARDED_BY(idle_mu_);
};

}  // namespace sn::docker

#endif  // SANDBOX_NODE_PRIVHELPER_DOCKER_BEAST_ENGINE_H_

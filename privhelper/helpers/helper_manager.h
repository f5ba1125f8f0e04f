// Native helpers: one process per generation, spawned on first use, spoken to over a
// socketpair (framing.h, proto/native_helper.proto). A helper counts as live from spawn until
// waitpid() returns for it, whatever happened to the callers; the count is what collection
// (later) must see drop to zero.
#ifndef SANDBOX_NODE_PRIVHELPER_HELPERS_HELPER_MANAGER_H_
#define SANDBOX_NODE_PRIVHELPER_HELPERS_HELPER_MANAGER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/privhelper.pb.h"

namespace sn::privhelper {

struct HelperOptions {
  std::string helper_path;      // the native_helper executable
  std::string provider = "docker";
  std::string installation_id;  // labels every native object
  std::string docker_socket = "/var/run/docker.sock";
  absl::Duration start_timeout = absl::Seconds(10);
  int max_helpers = 8;          // live helpers (generations) at once
};

// What privhelper resolved for one call from state it owns (its configuration and the
// generation it holds), never from the agent; sent to the helper beside the request.
struct ResolvedCall {
  std::string native_image;  // create: the native image of the request's image name
  int64_t max_active = 0;
  int64_t max_retained = 0;
};

class HelperManager {
 public:
  // How long, after signalling a call whose budget expired, Execute waits for its final outcome.
  static constexpr absl::Duration kFinalOutcomeGrace = absl::Seconds(3);

  explicit HelperManager(HelperOptions options);
  // Closes every helper's socket (helpers finish their calls and exit) and waits for all of
  // them (waitpid).
  ~HelperManager();

  // Runs `req` on its generation's helper (spawned when needed) and returns the helper's
  // answer. The budget (req.budget_ms) is anchored to this process's clock on entry.
  // `cancelled` is polled; on cancellation the helper is told to cancel and Cancelled is
  // returned at once (nobody waits for the answer). At budget expiry the helper is told to
  // cancel and, for up to kFinalOutcomeGrace, its final outcome is awaited and returned (so
  // the caller can record what really happened); DeadlineExceeded when it does not come. Unavailable when no helper could run the call
  // (spawn failed, helper died before answering: see the message).
  // REQUIRES: req.generation() > 0.
  absl::StatusOr<v1::ExecuteResponse> Execute(const v1::ExecuteRequest& req,
                                              const ResolvedCall& resolved,
                                              const std::function<bool()>& cancelled);

  // Helpers whose waitpid has not returned yet.
  int live_helpers() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until live_helpers() is 0 or `timeout` passes; true when it reached 0.
  bool WaitUntilNoLiveHelpers(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);
  // pid of the generation's current helper, or 0.
  pid_t helper_pid(int64_t generation) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Helper;
  absl::StatusOr<std::shared_ptr<Helper>> GetOrSpawn(int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::shared_ptr<Helper>> Spawn(int64_t generation);
  void ReaderLoop(std::shared_ptr<Helper> h);

  const HelperOptions options_;
  absl::Mutex spawn_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<Helper>> helpers_ ABSL_GUARDED_BY(mu_);
  int live_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_HELPERS_HELPER_MANAGER_H_

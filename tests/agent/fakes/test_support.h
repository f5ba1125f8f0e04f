// Small doubles the generation tests share: the event loop in miniature (closures posted from
// any thread, run by the test) and an in-memory pin store.
#ifndef SANDBOX_NODE_TESTS_AGENT_FAKES_TEST_SUPPORT_H_
#define SANDBOX_NODE_TESTS_AGENT_FAKES_TEST_SUPPORT_H_

#include <deque>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/generations/pins.h"

namespace sn::agent::testing {

class PostedLoop {
 public:
  void Post(std::function<void()> fn) {
    absl::MutexLock l(&mu_);
    queue_.push_back(std::move(fn));
  }
  // Runs posted closures until `done` holds; false when nothing arrived within `wait`.
  bool RunUntil(const std::function<bool()>& done, absl::Duration wait = absl::Seconds(60)) {
    const absl::Time deadline = absl::Now() + wait;
    while (!done()) {
      std::function<void()> fn;
      {
        absl::MutexLock l(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty(); };
        if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) return false;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
    return true;
  }
  size_t pending() {
    absl::MutexLock l(&mu_);
    return queue_.size();
  }

 private:
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
};

class MemoryPins final : public PinStore {
 public:
  absl::StatusOr<DeploymentPins> Load() override { return stored; }
  absl::Status Store(const DeploymentPins& p) override {
    if (!fail.ok()) return fail;
    stored = p;
    ++stores;
    return absl::OkStatus();
  }
  DeploymentPins stored;
  int stores = 0;
  absl::Status fail;
};

}  // namespace sn::agent::testing

#endif  // SANDBOX_NODE_TESTS_AGENT_FAKES_TEST_SUPPORT_H_

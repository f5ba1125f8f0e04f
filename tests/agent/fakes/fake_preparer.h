// A Preparer whose attempts end when the test says so (tests of the scheduler and the
// generation manager on SimulatedClock).
#ifndef SANDBOX_NODE_TESTS_AGENT_FAKES_FAKE_PREPARER_H_
#define SANDBOX_NODE_TESTS_AGENT_FAKES_FAKE_PREPARER_H_

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/generations/preparer.h"

namespace sn::agent::testing {

class FakePreparer final : public Preparer {
 public:
  struct Attempt {
    PreparationJob job;
    std::function<void(const PreparationProgress&)> progress;
    std::function<void(PreparationOutcome)> done;
    bool cancelled = false;
    bool ended = false;
  };

  std::unique_ptr<PreparationAttempt> Start(
      const PreparationJob& job, std::function<void(const PreparationProgress&)> progress,
      std::function<void(PreparationOutcome)> done) override {
    auto a = std::make_shared<Attempt>();
    a->job = job;
    a->progress = std::move(progress);
    a->done = std::move(done);
    attempts.push_back(a);
    return std::make_unique<Handle>(a);
  }

  // The latest attempt.
  Attempt& last() { return *attempts.back(); }
  // Ends the latest attempt.
  void Succeed(std::set<std::string> images = {"busybox"}) {
    PreparationOutcome o;
    o.state = HeldState::kReady;
    o.images = std::move(images);
    End(std::move(o));
  }
  void Fail(Diagnostic d, std::optional<HeldState> state = HeldState::kPreparing) {
    PreparationOutcome o;
    o.failure = d;
    o.state = state;
    End(std::move(o));
  }
  void End(PreparationOutcome o) {
    Attempt& a = last();
    a.ended = true;
    a.done(std::move(o));
  }
  // How many attempts were started and have not ended.
  int running() const {
    int n = 0;
    for (const auto& a : attempts) n += a->ended ? 0 : 1;
    return n;
  }

  std::vector<std::shared_ptr<Attempt>> attempts;

 private:
  class Handle final : public PreparationAttempt {
   public:
    explicit Handle(std::shared_ptr<Attempt> a) : a_(std::move(a)) {}
    void Cancel() override { a_->cancelled = true; }

   private:
    std::shared_ptr<Attempt> a_;
  };
};

}  // namespace sn::agent::testing

#endif  // SANDBOX_NODE_TESTS_AGENT_FAKES_FAKE_PREPARER_H_

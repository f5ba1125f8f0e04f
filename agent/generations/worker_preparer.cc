#include "agent/generations/worker_preparer.h"

#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sn::agent {
namespace {

class TokenAttempt final : public PreparationAttempt {
 public:
  explicit TokenAttempt(std::shared_ptr<CancelToken> token) : token_(std::move(token)) {}
  void Cancel() override { token_->Cancel(); }

 private:
  std::shared_ptr<CancelToken> token_;
};

}  // namespace

class WorkerPreparer::Impl {
 public:
  Impl(PreparationContext context, std::function<void(std::function<void()>)> post)
      : context_(std::move(context)), post_(std::move(post)), thread_([this] { Loop(); }) {}

  ~Impl() {
    {
      absl::MutexLock l(&mu_);
      stopping_ = true;
      for (const Job& j : queue_) j.token->Cancel();
      if (current_ != nullptr) current_->Cancel();
    }
    thread_.join();
  }

  std::unique_ptr<PreparationAttempt> Start(const PreparationJob& job,
                                            std::function<void(const PreparationProgress&)> progress,
                                            std::function<void(PreparationOutcome)> done) {
    auto token = std::make_shared<CancelToken>();
    absl::MutexLock l(&mu_);
    queue_.push_back(Job{job.ref, token, std::move(progress), std::move(done)});
    return std::make_unique<TokenAttempt>(std::move(token));
  }

 private:
  struct Job {
    GenerationRef ref;
    std::shared_ptr<CancelToken> token;
    std::function<void(const PreparationProgress&)> progress;
    std::function<void(PreparationOutcome)> done;
  };

  void Loop() {
    for (;;) {
      Job job;
      {
        absl::MutexLock l(&mu_);
        mu_.Await(absl::Condition(
            +[](Impl* i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(i->mu_) {
              return i->stopping_ || !i->queue_.empty();
            },
            this));
        if (stopping_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        current_ = job.token;
      }
      auto progress = job.progress;
      const ProgressFn on_progress = [this, progress](const PreparationProgress& p) {
        post_([progress, p] { progress(p); });
      };
      PreparationOutcome outcome = RunPreparation(context_, job.ref, job.token.get(), on_progress);
      {
        absl::MutexLock l(&mu_);
        current_ = nullptr;
        if (stopping_) return;  // nothing is posted once the owner is going away
      }
      post_([done = std::move(job.done), outcome = std::move(outcome)]() mutable {
        done(std::move(outcome));
      });
    }
  }

  PreparationContext context_;
  std::function<void(std::function<void()>)> post_;
  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<CancelToken> current_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started after everything it uses
};

WorkerPreparer::WorkerPreparer(PreparationContext context,
                               std::function<void(std::function<void()>)> post)
    : impl_(std::make_unique<Impl>(std::move(context), std::move(post))) {}

WorkerPreparer::~WorkerPreparer() = default;

std::unique_ptr<PreparationAttempt> WorkerPreparer::Start(
    const PreparationJob& job, std::function<void(const PreparationProgress&)> progress,
    std::function<void(PreparationOutcome)> done) {
  return impl_->Start(job, std::move(progress), std::move(done));
}

}  // namespace sn::agent

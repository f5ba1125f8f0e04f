#include "agent/privhelper_rpc/serial_worker.h"

#include <utility>

namespace sn::agent {

SerialWorker::SerialWorker() : thread_([this] { Loop(); }) {}

SerialWorker::~SerialWorker() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void SerialWorker::Run(std::function<void()> fn) {
  absl::MutexLock l(&mu_);
  queue_.push_back(std::move(fn));
}

void SerialWorker::Loop() {
  for (;;) {
    std::function<void()> fn;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](SerialWorker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->stopping_ || !w->queue_.empty();
          },
          this));
      if (stopping_) return;
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

}  // namespace sn::agent

// The Execute calls in flight inside privhelper, per generation, and the generation a
// collection is checking (requirements "References and collection"). A call takes a reference
// once its generation resolved and holds it until it returns; a collection's check
// (BeginCollect) and the start of a reference exclude each other, so a collection that found
// no reference is never overtaken by a call that starts after it looked.
//
// Thread-safe.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_REFERENCES_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_REFERENCES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sn::privhelper {

class GenerationRefs {
 public:
  class Ref {
   public:
    Ref(GenerationRefs* r, int64_t g) : r_(r), g_(g) {}
    Ref(Ref&& o) noexcept : r_(o.r_), g_(o.g_) { o.r_ = nullptr; }
    Ref(const Ref&) = delete;
    Ref& operator=(const Ref&) = delete;
    Ref& operator=(Ref&&) = delete;
    ~Ref() {
      if (r_ != nullptr) r_->Release(g_);
    }

   private:
    GenerationRefs* r_;
    int64_t g_;
  };

  // A reference on `g`, or nullopt while a collection of `g` runs.
  std::optional<Ref> Acquire(int64_t g) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (collecting_.count(g) > 0) return std::nullopt;
    ++calls_[g];
    return Ref(this, g);
  }

  // Marks `g` as being collected when no call references it; Acquire(g) then refuses until
  // EndCollect(g). Returns the calls in flight (0: marked).
  int BeginCollect(int64_t g) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = calls_.find(g);
    if (it != calls_.end() && it->second > 0) return it->second;
    collecting_.insert(g);
    return 0;
  }
  void EndCollect(int64_t g) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    collecting_.erase(g);
  }

  int calls(int64_t g) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = calls_.find(g);
    return it == calls_.end() ? 0 : it->second;
  }
  bool collecting() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return !collecting_.empty();
  }

 private:
  void Release(int64_t g) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (--calls_[g] == 0) calls_.erase(g);
  }

  mutable absl::Mutex mu_;
  std::map<int64_t, int> calls_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> collecting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_REFERENCES_H_

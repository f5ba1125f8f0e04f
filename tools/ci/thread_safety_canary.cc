// A deliberate lock-annotation violation. `.ci/run` builds this target with --config=tsa and
// requires the build to FAIL with -Wthread-safety-analysis: proof that the configuration
// that builds //... really checks ABSL_GUARDED_BY (with Debian's Abseil headers and clang),
// rather than accepting the annotations as decoration. Tagged manual: never part of //....
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sn::ci {

class Counter {
 public:
  void Locked() {
    absl::MutexLock lock(&mu_);
    ++n_;
  }
  void Unlocked() { ++n_; }  // the violation: n_ is written without mu_

 private:
  absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};

void Touch(Counter& c) {
  c.Locked();
  c.Unlocked();
}

}  // namespace sn::ci

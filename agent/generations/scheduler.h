// The preparation scheduler (requirements "Restart recovery"): which generation is prepared
// next, and when. Pure state machine on the event loop; time comes from the injected Clock and
// TimerQueue, attempts from a Preparer, so tests run it on SimulatedClock without sleeping.
//   - Serialized: one attempt at a time; a cancelled attempt still occupies the slot until it
//     has actually ended (privhelper runs one preparation at a time, too).
//   - Order: the wanted jobs in the order the owner gives them (generation manager: target,
//     then serving, then the others that need it — repairs enter there).
//   - Deadline: each attempt is cancelled after 30 minutes and ends preparation_timeout.
//   - Backoff: a failed attempt (timeout included) makes its generation wait 1, 2, 5, 10, then
//     30 minutes after its 1st, 2nd, 3rd, 4th and every later consecutive failure; other
//     generations may run meanwhile. A success forgets the count.
//   - Cancellation: a job that is no longer wanted (a superseded target) or Pause() (the
//     connection was lost) cancels the running attempt: preparation_cancelled, which does not
//     count as a failure. A paused scheduler starts nothing; its backoff state is kept.
//   - Progress: the running attempt's latest progress is kept (entries()); `on_progress`
//     runs, and a line is logged, when common/progress_limiter.h says so: at each new phase
//     or artifact, then at every tenth of the bytes or 5 s after the last line, whichever
//     comes first, and when the bytes are complete.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_SCHEDULER_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/generations/preparer.h"
#include "agent/generations/types.h"
#include "common/clock.h"
#include "common/progress_limiter.h"

namespace sn::agent {

inline constexpr absl::Duration kPreparationDeadline = absl::Minutes(30);

// The wait after the n-th consecutive failure (n >= 1): 1, 2, 5, 10, then 30 minutes.
absl::Duration PreparationRetryDelay(int consecutive_failures);

class PreparationScheduler {
 public:
  enum class Phase { kQueued, kRunning, kBackoff };
  struct Entry {
    PreparationJob job;
    Phase phase = Phase::kQueued;
    int failures = 0;                        // consecutive
    std::optional<Diagnostic> last_failure;  // of the last attempt that did not succeed
    MonoTime retry_at = absl::ZeroDuration();  // kBackoff: when it may run again
    std::optional<PreparationProgress> progress;  // kRunning
  };
  // Every attempt's end (superseded ones included), with the diagnostic the scheduler
  // assigns: preparation_timeout / preparation_cancelled when it cancelled the attempt and it
  // did not succeed anyway; and the attempt's last progress.
  using FinishedFn = std::function<void(const PreparationJob&, const PreparationOutcome&,
                                        const PreparationProgress& last_progress)>;
  using ProgressFn = std::function<void(const PreparationJob&, const PreparationProgress&)>;

  // Pointers must outlive the scheduler. Callbacks may call back into it.
  PreparationScheduler(const Clock* clock, TimerQueue* timers, Preparer* preparer,
                       FinishedFn on_finished, ProgressFn on_progress = nullptr);
  ~PreparationScheduler();

  // Replaces the wanted jobs (priority order, unique generations). A job kept with the same
  // (generation, digest) keeps its backoff state; a running attempt whose job is no longer
  // wanted is cancelled.
  void SetWanted(std::vector<PreparationJob> jobs);
  void Pause();
  void Resume();
  bool paused() const { return paused_; }

  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* Find(int64_t generation) const;
  // True while an attempt (perhaps already cancelled) has not ended.
  bool busy() const { return running_.has_value(); }

 private:
  struct Running {
    // User-provided: clang decides std::optional<Running>'s constructibility while the
    // enclosing class is still incomplete, which a defaulted one with initializers fails.
    Running() {}
    uint64_t id = 0;
    PreparationJob job;
    std::unique_ptr<PreparationAttempt> attempt;
    std::optional<Diagnostic> cancel_reason;
    std::unique_ptr<Timer> deadline;
    PreparationProgress progress;
    ProgressLimiter lines;  // which progress gets a line (and on_progress)
  };

  Entry* FindMutable(const GenerationRef& ref);
  void MaybeStart();
  void StartEntry(Entry& e);
  void CancelRunning(Diagnostic reason);
  void OnProgress(uint64_t id, const PreparationProgress& p);
  void OnDone(uint64_t id, PreparationOutcome outcome);

  const Clock* clock_;
  TimerQueue* timers_;
  Preparer* preparer_;
  FinishedFn on_finished_;
  ProgressFn on_progress_;
  std::vector<Entry> entries_;
  std::optional<Running> running_;
  uint64_t next_id_ = 1;
  bool paused_ = false;
  std::unique_ptr<Timer> wake_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_SCHEDULER_H_

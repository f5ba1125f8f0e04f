// The node's retention decisions (spec/wire.md §3 retention; seed "Local retention and helper
// lifetime"; docs/protocol.md 14j-14n), behind Connection's RetentionControl:
//   - what to ask: the candidates generation management names (retention_facts.h: records
//     that are neither target nor serving pin nor being prepared, unfinished journals
//     included), at most 8 per exchange, the ones due longest ago first (never asked before
//     any other), so every candidate is asked within ceil(n/8) exchanges;
//   - how often: the Connection offers an exchange right after welcome and at each heartbeat
//     tick (10 s) when none is pending; a candidate is due when never answered, 60 s after
//     Core said keep (kRetentionCycle), 30 s after a grant that could not be used
//     (kRetentionHeldRetry) and 30 min after privhelper refused its collection;
//   - a keep:false is a drop grant of the connection it arrived on, and only of it. Grants
//     are used one at a time: at that moment the local references are checked again (the
//     target, the serving pin, a scheduled or running preparation, queued or running provider
//     calls on it, counted until privhelper's answer arrived) and the connection must still be
//     live; only then privhelper's CollectGeneration is called (collector.h), which re-checks
//     what it owns. A grant whose connection ended is ignored; the end of a connection
//     cancels the collection in flight (privhelper refuses a caller that left).
//   - outcomes: DROPPED is final (generation management never reports or prepares it
//     again); HELD changes nothing and needs a new grant; REFUSED and FAILED are logged, the
//     generation kept and the reason recorded for `agent generations`.
// Nothing here settles anything remote: a collection is about local files only.
// Single-threaded: every method runs on the event loop.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_RETENTION_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_RETENTION_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "agent/connection/retention_control.h"
#include "agent/generations/collector.h"
#include "agent/generations/retention_facts.h"
#include "agent/generations/retention_file.h"
#include "agent/generations/types.h"
#include "common/clock.h"

namespace sn::agent {

inline constexpr absl::Duration kRetentionCycle = absl::Seconds(60);
inline constexpr absl::Duration kRetentionHeldRetry = absl::Seconds(30);
inline constexpr absl::Duration kRetentionRefusedRetry = absl::Minutes(30);

class RetentionDecisions final : public RetentionControl {
 public:
  // The queued and running provider calls on a generation (agent/requests/request_queue.h CallsOn).
  using CallCounter = std::function<size_t(int64_t generation)>;
  // Every change of what the node learned (to persist it for `agent generations`).
  using Recorder = std::function<void(const std::vector<RetentionStatus>&)>;

  // Pointers must outlive the object. `recorder` may be empty.
  RetentionDecisions(const Clock* clock, RetentionFacts* facts, CallCounter calls,
                     GenerationCollector* collector, Recorder recorder = nullptr);
  ~RetentionDecisions() override;

  // RetentionControl.
  void OnLive() override;
  void OnLiveEnded() override;
  std::vector<wire::RetentionEntry> NextRetentionRequest() override;
  void OnRetentionAnswer(const std::vector<wire::RetentionEntry>& answers) override;

  // Tests and the operator view.
  std::vector<RetentionStatus> Statuses() const;
  bool collecting() const { return in_flight_.has_value(); }
  size_t pending_grants() const { return grants_.size(); }

 private:
  using Key = std::pair<int64_t, std::string>;
  struct Candidate {
    RetentionStatus status;
    MonoTime due = absl::ZeroDuration();  // may be asked from then on
    bool ever_answered = false;
  };
  struct Grant {
    GenerationRef ref;
    uint64_t connection = 0;
  };
  struct InFlight {
    GenerationRef ref;
    uint64_t connection = 0;
    std::unique_ptr<CollectCall> call;
  };

  void UseGrants();
  void OnCollected(uint64_t id, CollectResult result);
  Candidate& CandidateOf(const GenerationRef& ref);
  void Record();

  const Clock* clock_;
  RetentionFacts* facts_;
  CallCounter calls_;
  GenerationCollector* collector_;
  Recorder recorder_;

  bool live_ = false;
  uint64_t connection_ = 0;  // incremented per live connection
  std::map<Key, Candidate> candidates_;
  std::deque<Grant> grants_;
  std::optional<InFlight> in_flight_;
  uint64_t next_call_ = 0;
  std::vector<RetentionStatus> last_recorded_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_RETENTION_H_

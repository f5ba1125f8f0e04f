// The running agent's live status for `agent status` (agent/cli/status_view.h): what only the
// running process knows — the connection's state since when and how the last one ended, the
// provider as privhelper's latest probe saw it (or that privhelper is not answering), requests
// of the last minute by outcome, the last error, each running preparation's progress and ETA —
// as one JSON document served on the status socket (`GET /status`, <state_dir>/status.sock,
// 0600). Members: docs/operator-guide.md, "agent status". Fed by the same events as the
// metrics, on the event loop; the clock is injected.
#ifndef SANDBOX_NODE_AGENT_METRICS_NODE_STATUS_H_
#define SANDBOX_NODE_AGENT_METRICS_NODE_STATUS_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "agent/metrics/node_collectors.h"
#include "common/clock.h"

namespace sn::agent {

inline constexpr char kStatusSocketName[] = "status.sock";
inline std::string StatusSocketPath(const std::string& state_dir) {
  return state_dir + "/" + kStatusSocketName;
}

// Counts by outcome over the last 60 seconds, in one-second buckets (bounded: 60 buckets, and
// the outcomes are the metrics' bounded labels).
class RecentOutcomes {
 public:
  void Add(MonoTime now, std::string_view outcome);
  std::map<std::string, int64_t> LastMinute(MonoTime now) const;

 private:
  struct Bucket {
    int64_t second = -1;
    std::map<std::string, int64_t> counts;
  };
  std::array<Bucket, 60> buckets_;
};

class NodeStatus {
 public:
  explicit NodeStatus(const Clock* clock) : clock_(clock) {}

  // ---- events (the event loop)
  void RequestAnswered(std::string_view operation, std::string_view outcome);
  void Live();
  void Redial(std::string_view why);
  void ProbeAnswered() {
    probe_failed_at_.reset();
    last_probe_at_ = clock_->Now();
  }
  void ProbeFailed() { probe_failed_at_ = clock_->Now(); }
  // A preparation's progress (the agent's ProgressRecorder): the ETA's rate is measured from
  // the first report of the current phase.
  void PreparationProgress(int64_t generation, const std::string& phase, int64_t bytes_done,
                           bool finished);

  // The document served at GET /status.
  std::string Json(const NodeView& view) const;

 private:
  struct Rate {
    std::string phase;
    MonoTime started;
    int64_t bytes_at_start = 0;
  };
  const Clock* clock_;
  RecentOutcomes recent_;
  std::optional<absl::Time> since_;  // of the current connection state (live or not)
  std::optional<std::string> last_close_;
  std::optional<absl::Time> last_probe_at_;
  std::optional<absl::Time> probe_failed_at_;
  struct LastError {
    std::string operation, outcome;
    absl::Time at;
  };
  std::optional<LastError> last_error_;
  std::map<int64_t, Rate> rates_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_METRICS_NODE_STATUS_H_

// What the agent counts and shows for Prometheus (`GET /metrics`, metrics_server.h; the
// families and their labels: docs/operator-guide.md, "Metrics"). Events are counted as they
// happen (requests answered, redials, heartbeats, retention exchanges); everything that is a
// state (requests pending and running, the connection, generations, the provider's counts,
// this process's figures) is read when a scrape renders, by the collectors run.cc registers.
//
// Cardinality is bounded by construction: no label takes a sandbox id, request id or path. The
// operation label is one of §5's ten names (else "other"), the outcome "success" or one of §7's
// nine error codes (else "other"), a redial's reason one of a fixed set of close codes and dial
// failures (else "other"); generation labels only for generations the node holds, which
// privhelper bounds (max_generations). Not thread-safe: the event loop's alone.
#ifndef SANDBOX_NODE_AGENT_METRICS_AGENT_METRICS_H_
#define SANDBOX_NODE_AGENT_METRICS_AGENT_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/metrics/exposition.h"

namespace sn::agent {

class AgentMetrics {
 public:
  AgentMetrics();

  // ---- events
  void RequestAnswered(std::string_view operation, std::string_view outcome,
                       absl::Duration latency);
  void Redial(std::string_view why);
  void HeartbeatSent() { ++heartbeats_sent_; }
  void HeartbeatMissed() { ++heartbeats_missed_; }
  void RetentionExchange(std::string_view outcome);
  // A preparation attempt ended: "ready" or its §7 diagnostic code.
  void PreparationFinished(std::string_view outcome) { ++preparations_[std::string(outcome)]; }

  // ---- scrape time: each collector appends whole families.
  void AddCollector(std::function<void(metrics::Exposition&)> collector) {
    collectors_.push_back(std::move(collector));
  }
  // The whole exposition: the counted families, then every collector's.
  std::string Render() const;

  // The label a value takes (bounded): itself when it is one of the known ones, else "other".
  static std::string_view OperationLabel(std::string_view operation);
  static std::string_view OutcomeLabel(std::string_view outcome);
  static std::string_view RedialLabel(std::string_view why);

 private:
  std::map<std::pair<std::string, std::string>, uint64_t> requests_;  // (operation, outcome)
  std::map<std::string, metrics::Histogram> latency_;                 // by operation
  std::map<std::string, uint64_t> redials_;                           // by reason
  std::map<std::string, uint64_t> retention_;                         // by outcome
  std::map<std::string, uint64_t> preparations_;                      // by outcome
  uint64_t heartbeats_sent_ = 0;
  uint64_t heartbeats_missed_ = 0;
  std::vector<std::function<void(metrics::Exposition&)>> collectors_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_METRICS_AGENT_METRICS_H_

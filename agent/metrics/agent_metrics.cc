#include "agent/metrics/agent_metrics.h"

#include <array>

#include "common/operations.h"

namespace sn::agent {
namespace {

// §7's error codes (spec/wire.md), the outcomes a response can carry besides success.
constexpr std::array<std::string_view, 9> kErrorCodes = {"invalid",     "unsupported", "capacity",
                                                         "conflict",    "not_found",   "failed",
                                                         "unconfirmed", "unavailable", "uncertain"};

// Why a redial happened: the close codes of §3's and RFC 6455's that a connection can end
// with, and the dial failures (Connection's Events::redial).
constexpr std::array<std::string_view, 22> kRedialReasons = {
    "1000", "1001",     "1002",     "1006",     "1008",     "1009",       "1011", "4000",
    "4001", "4002",     "4003",     "4005",     "4006",     "4007",       "4008", "4009",
    "4010", "http_401", "http_403", "http_429", "http_503", "unreachable"};

template <typename List>
std::string_view Bounded(const List& known, std::string_view value) {
  for (std::string_view k : known) {
    if (k == value) return k;
  }
  return "other";
}

}  // namespace

AgentMetrics::AgentMetrics() = default;

std::string_view AgentMetrics::OperationLabel(std::string_view operation) {
  std::optional<Operation> op = ParseOperation(operation);
  return op.has_value() ? OperationName(*op) : "other";
}

std::string_view AgentMetrics::OutcomeLabel(std::string_view outcome) {
  return outcome == "success" ? "success" : Bounded(kErrorCodes, outcome);
}

std::string_view AgentMetrics::RedialLabel(std::string_view why) {
  return Bounded(kRedialReasons, why);
}

void AgentMetrics::RequestAnswered(std::string_view operation, std::string_view outcome,
                                   absl::Duration latency) {
  const std::string op(OperationLabel(operation));
  ++requests_[{op, std::string(OutcomeLabel(outcome))}];
  auto it = latency_.find(op);
  if (it == latency_.end()) it = latency_.emplace(op, metrics::LatencyBuckets()).first;
  it->second.Observe(absl::ToDoubleSeconds(latency));
}

void AgentMetrics::Redial(std::string_view why) { ++redials_[std::string(RedialLabel(why))]; }

void AgentMetrics::RetentionExchange(std::string_view outcome) {
  ++retention_[std::string(outcome)];
}

std::string AgentMetrics::Render() const {
  metrics::Exposition e;
  e.Family("sandbox_node_requests_total",
           "Provider requests answered, by operation and outcome (success or the error code).",
           "counter");
  for (const auto& [key, n] : requests_) {
    e.Sample("sandbox_node_requests_total", {{"operation", key.first}, {"outcome", key.second}},
             static_cast<double>(n));
  }
  e.Family("sandbox_node_request_duration_seconds",
           "From a request frame's arrival to its response, by operation.", "histogram");
  for (const auto& [op, h] : latency_) {
    e.HistogramSamples("sandbox_node_request_duration_seconds", {{"operation", op}}, h);
  }
  e.Family("sandbox_node_reconnects_total",
           "Redials of Core, by the close code that ended the connection or the dial failure.",
           "counter");
  for (const auto& [why, n] : redials_) {
    e.Sample("sandbox_node_reconnects_total", {{"close_code", why}}, static_cast<double>(n));
  }
  e.Family("sandbox_node_heartbeats_sent_total", "Heartbeats sent to Core.", "counter");
  e.Sample("sandbox_node_heartbeats_sent_total", {}, static_cast<double>(heartbeats_sent_));
  e.Family("sandbox_node_heartbeats_missed_total",
           "Heartbeat ticks skipped because the previous health report was still being collected.",
           "counter");
  e.Sample("sandbox_node_heartbeats_missed_total", {}, static_cast<double>(heartbeats_missed_));
  e.Family("sandbox_node_retention_exchanges_total", "Retention exchanges with Core, by outcome.",
           "counter");
  for (const auto& [outcome, n] : retention_) {
    e.Sample("sandbox_node_retention_exchanges_total", {{"outcome", outcome}},
             static_cast<double>(n));
  }
  e.Family("sandbox_node_preparations_total",
           "Preparation attempts of a generation that ended, by outcome (ready or the diagnostic).",
           "counter");
  for (const auto& [outcome, n] : preparations_) {
    e.Sample("sandbox_node_preparations_total", {{"outcome", outcome}}, static_cast<double>(n));
  }
  for (const auto& collect : collectors_) collect(e);
  return e.text();
}

}  // namespace sn::agent

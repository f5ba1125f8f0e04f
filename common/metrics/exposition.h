// The Prometheus text exposition format, version 0.0.4 (what `GET /metrics` answers; names
// after Prometheus' conventions and OpenMetrics-compatible: docs/operator-guide.md, "Metrics").
// A writer of families and their samples, and the two value kinds the node keeps itself: a
// fixed-bucket histogram and its observations. Pure, no I/O; not thread-safe (the agent builds
// and renders on its event loop).
#ifndef SANDBOX_NODE_COMMON_METRICS_EXPOSITION_H_
#define SANDBOX_NODE_COMMON_METRICS_EXPOSITION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sn::metrics {

// A sample's labels, in order: names are the caller's constants (checked), values any text
// (escaped: backslash, double quote, line feed).
using Labels = std::vector<std::pair<std::string_view, std::string>>;

// Observations in fixed upper bounds (seconds, bytes...): `le` buckets, `_sum`, `_count`.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // strictly increasing, finite
  void Observe(double value);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Per bucket (not cumulative), the last one the +Inf bucket.
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Latency buckets of a request, Core's frame in to the response out (seconds).
std::vector<double> LatencyBuckets();

class Exposition {
 public:
  // Starts a family: its `# HELP` and `# TYPE` lines. `type` is "counter", "gauge" or
  // "histogram"; a family's samples follow it before the next family starts.
  void Family(std::string_view name, std::string_view help, std::string_view type);
  // One sample of the current family (`name` is the family's, or its `_bucket`, `_sum`,
  // `_count`).
  void Sample(std::string_view name, const Labels& labels, double value);
  // All samples of a histogram of the current family.
  void HistogramSamples(std::string_view name, const Labels& labels, const Histogram& h);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

// A label value or HELP text escaped as the format requires.
std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelp(std::string_view help);
// A sample value: integers as integers, others with full precision; +Inf, -Inf, NaN.
std::string FormatValue(double value);
// [a-zA-Z_:][a-zA-Z0-9_:]* (metric names) / [a-zA-Z_][a-zA-Z0-9_]* (label names).
bool IsMetricName(std::string_view name);
bool IsLabelName(std::string_view name);

}  // namespace sn::metrics

#endif  // SANDBOX_NODE_COMMON_METRICS_EXPOSITION_H_

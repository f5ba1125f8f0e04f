// The exposition format (escaping, values, histogram buckets), the agent's counted families and
// their bounded labels, and a process's figures from /proc.
#include <string>

#include "agent/metrics/agent_metrics.h"
#include "common/metrics/exposition.h"
#include "common/metrics/process_figures.h"
#include "gtest/gtest.h"

namespace sn {
namespace {

using metrics::Exposition;
using metrics::Histogram;

TEST(ExpositionTest, LabelValuesAndHelpAreEscapedAsTheFormatSays) {
  EXPECT_EQ(metrics::EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(metrics::EscapeHelp("x\\y\nz \"q\""), "x\\\\y\\nz \"q\"");
  Exposition e;
  e.Family("m_total", "Help with \\ and\nnewline.", "counter");
  e.Sample("m_total", {{"k", "v\"1"}}, 3);
  EXPECT_EQ(e.text(),
            "# HELP m_total Help with \\\\ and\\nnewline.\n# TYPE m_total counter\n"
            "m_total{k=\"v\\\"1\"} 3\n");
}

TEST(ExpositionTest, ValuesAreIntegersOrFullPrecisionAndTheSpecialOnesAreSpelled) {
  EXPECT_EQ(metrics::FormatValue(0), "0");
  EXPECT_EQ(metrics::FormatValue(1234567890123), "1234567890123");
  EXPECT_EQ(metrics::FormatValue(-2), "-2");
  EXPECT_EQ(metrics::FormatValue(0.25), "0.25");
  EXPECT_EQ(metrics::FormatValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(metrics::FormatValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(metrics::FormatValue(0.0 / 0.0), "NaN");
}

TEST(ExpositionTest, NamesFollowPrometheusRules) {
  EXPECT_TRUE(metrics::IsMetricName("sandbox_node_requests_total"));
  EXPECT_TRUE(metrics::IsMetricName("a:b"));
  EXPECT_FALSE(metrics::IsMetricName("1abc"));
  EXPECT_FALSE(metrics::IsMetricName("a-b"));
  EXPECT_TRUE(metrics::IsLabelName("close_code"));
  EXPECT_FALSE(metrics::IsLabelName("a:b"));
}

TEST(ExpositionTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Histogram h({0.1, 1});
  for (double v : {0.05, 0.1, 0.5, 2.0}) h.Observe(v);
  Exposition e;
  e.Family("d_seconds", "D.", "histogram");
  e.HistogramSamples("d_seconds", {{"operation", "exec"}}, h);
  EXPECT_EQ(e.text(),
            "# HELP d_seconds D.\n# TYPE d_seconds histogram\n"
            "d_seconds_bucket{operation=\"exec\",le=\"0.10000000000000001\"} 2\n"
            "d_seconds_bucket{operation=\"exec\",le=\"1\"} 3\n"
            "d_seconds_bucket{operation=\"exec\",le=\"+Inf\"} 4\n"
            "d_seconds_sum{operation=\"exec\"} 2.6499999999999999\n"
            "d_seconds_count{operation=\"exec\"} 4\n");
}

TEST(AgentMetricsTest, RequestsAreCountedByOperationAndOutcomeWithBoundedLabels) {
  agent::AgentMetrics m;
  m.RequestAnswered("create", "success", absl::Milliseconds(30));
  m.RequestAnswered("create", "success", absl::Milliseconds(40));
  m.RequestAnswered("exec", "uncertain", absl::Seconds(2));
  // Anything not in §5 / §7 is "other": a hostile Core cannot grow the label sets.
  m.RequestAnswered("format_disk", "exploded", absl::ZeroDuration());
  m.Redial("4007");
  m.Redial("4999");
  m.Redial("unreachable");
  m.HeartbeatSent();
  m.HeartbeatMissed();
  m.RetentionExchange("all_kept");
  const std::string text = m.Render();
  EXPECT_NE(text.find("sandbox_node_requests_total{operation=\"create\",outcome=\"success\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sandbox_node_requests_total{operation=\"exec\",outcome=\"uncertain\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("sandbox_node_requests_total{operation=\"other\",outcome=\"other\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("sandbox_node_request_duration_seconds_count{operation=\"create\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("sandbox_node_reconnects_total{close_code=\"4007\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("sandbox_node_reconnects_total{close_code=\"other\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("sandbox_node_reconnects_total{close_code=\"unreachable\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("sandbox_node_heartbeats_sent_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("sandbox_node_heartbeats_missed_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("sandbox_node_retention_exchanges_total{outcome=\"all_kept\"} 1\n"),
            std::string::npos);
}

TEST(AgentMetricsTest, LabelSetsStayBoundedWhateverArrives) {
  agent::AgentMetrics m;
  for (int i = 0; i < 10000; ++i) {
    m.RequestAnswered("op" + std::to_string(i), "code" + std::to_string(i), absl::ZeroDuration());
    m.Redial(std::to_string(i));
  }
  const std::string text = m.Render();
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_LT(lines, 60u) << text;
}

TEST(ProcessFiguresTest, CpuTicksAreReadAfterTheCommandNameWhateverItHolds) {
  EXPECT_EQ(metrics::ParseStatCpuTicks(
                "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 10 1000 50"),
            std::optional<uint64_t>(12));
  EXPECT_EQ(metrics::ParseStatCpuTicks("42 (x) S 1"), std::nullopt);
  EXPECT_EQ(metrics::ParseStatCpuTicks("no parenthesis"), std::nullopt);
}

TEST(ProcessFiguresTest, ThisProcessHasMemoryAndDescriptors) {
  absl::StatusOr<metrics::ProcessFigures> f = metrics::ReadProcessFigures();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_GT(f->resident_bytes, 1 << 20);
  EXPECT_GE(f->open_fds, 3);
  EXPECT_GE(f->cpu_seconds, 0);
}

}  // namespace
}  // namespace sn

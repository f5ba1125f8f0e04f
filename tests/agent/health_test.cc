// Health reports: a fresh probe each time, fixed codes only, host measurements from /proc.
#include <stdlib.h>

#include <fstream>

#include "agent/host_metrics.h"
#include "agent/privhelper_client.h"
#include "agent/probe_health.h"
#include "gtest/gtest.h"

namespace sn::agent {
namespace {

constexpr char kInst[] = "22222222-2222-4222-8222-222222222222";

class FakeProber final : public ProviderProber {
 public:
  void Probe(int64_t generation,
             std::function<void(absl::StatusOr<ProbeOutcome>)> done) override {
    ++probes;
    last_generation = generation;
    done(next);
  }
  absl::StatusOr<ProbeOutcome> next = ProbeOutcome{true, Diagnostic::kProviderUnavailable,
                                                   "docker/20.10 overlay2", "docker", kInst};
  int probes = 0;
  int64_t last_generation = 0;
};

class FixedHost final : public HostMetricsSource {
 public:
  wire::HostMetrics Measure() override {
    wire::HostMetrics m;
    m.cpu_cores = 4;
    return m;
  }
};

TEST(ProbeHealthTest, EveryReportProbesAgain) {
  FakeProber prober;
  FixedHost host;
  SimulatedClock clock(absl::FromUnixSeconds(1795000000));
  ProbeHealthSource source(&prober, &host, &clock, 7, kInst);
  std::vector<HealthReport> reports;
  source.Collect([&](HealthReport r) { reports.push_back(r); });
  source.Collect([&](HealthReport r) { reports.push_back(r); });
  EXPECT_EQ(prober.probes, 2);
  EXPECT_EQ(prober.last_generation, 7);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].health.provider_ready, std::optional<bool>(true));
  EXPECT_FALSE(reports[0].health.diagnostic.has_value());
  EXPECT_EQ(reports[0].backend_fingerprint, "docker/20.10 overlay2");
  EXPECT_EQ(reports[0].health.observed_at, "2026-11-18T11:06:40.000Z");
  EXPECT_EQ(reports[0].health.host.cpu_cores, 4);
}

TEST(ProbeHealthTest, UnreadyProviderReportsItsFixedCode) {
  FakeProber prober;
  prober.next = ProbeOutcome{false, Diagnostic::kDaemonUnreachable, "", "docker", kInst};
  FixedHost host;
  SimulatedClock clock;
  ProbeHealthSource source(&prober, &host, &clock, 7, kInst);
  HealthReport got;
  source.Collect([&](HealthReport r) { got = r; });
  EXPECT_EQ(got.health.provider_ready, std::optional<bool>(false));
  EXPECT_EQ(got.health.diagnostic, std::optional<std::string>("daemon_unreachable"));
}

TEST(ProbeHealthTest, UnreachablePrivhelperIsProviderUnavailableWithoutItsText) {
  FakeProber prober;
  prober.next = absl::UnavailableError("connect to /run/secret/path.sock failed");
  FixedHost host;
  SimulatedClock clock;
  ProbeHealthSource source(&prober, &host, &clock, 7, kInst);
  HealthReport got;
  source.Collect([&](HealthReport r) { got = r; });
  EXPECT_EQ(got.health.provider_ready, std::optional<bool>(false));
  EXPECT_EQ(got.health.diagnostic, std::optional<std::string>("provider_unavailable"));
  EXPECT_TRUE(got.backend_fingerprint.empty());
}

TEST(ProbeHealthTest, PrivhelperOwningAnotherInstallationIsOwnershipRefused) {
  FakeProber prober;
  prober.next = ProbeOutcome{true, Diagnostic::kProviderUnavailable, "docker/20.10 overlay2",
                             "docker", "33333333-3333-4333-8333-333333333333"};
  FixedHost host;
  SimulatedClock clock;
  ProbeHealthSource source(&prober, &host, &clock, 7, kInst);
  HealthReport got;
  source.Collect([&](HealthReport r) { got = r; });
  EXPECT_EQ(got.health.provider_ready, std::optional<bool>(false));
  EXPECT_EQ(got.health.diagnostic, std::optional<std::string>("ownership_refused"));
}

TEST(DiagnosticFromProtoTest, MapsEveryCodeAndNormalizesUnknowns) {
  EXPECT_EQ(DiagnosticFromProto(3), Diagnostic::kDaemonUnreachable);
  EXPECT_EQ(DiagnosticFromProto(13), Diagnostic::kConfigurationInvalid);
  EXPECT_EQ(DiagnosticFromProto(0), Diagnostic::kProviderUnavailable);
  EXPECT_EQ(DiagnosticFromProto(999), Diagnostic::kProviderUnavailable);
  for (size_t i = 0; i < kDiagnostics.size(); ++i) {
    EXPECT_EQ(DiagnosticFromProto(static_cast<int>(i) + 1), kDiagnostics[i].value);
  }
}

TEST(HostMetricsTest, LoadAverageIsFormattedForTheWire) {
  EXPECT_EQ(ParseLoadAverage("0.52 0.58 0.59 1/234 5678\n"), "0.52");
  EXPECT_EQ(ParseLoadAverage("12.00 1 1"), "12.00");
  EXPECT_EQ(ParseLoadAverage("3 1 1"), "3");
  EXPECT_EQ(ParseLoadAverage("99999999.5 1 1"), "9999999");
  EXPECT_EQ(ParseLoadAverage("1.1234567 1 1"), "1.123456");
  EXPECT_FALSE(ParseLoadAverage("abc").has_value());
  EXPECT_FALSE(ParseLoadAverage("").has_value());
  EXPECT_FALSE(ParseLoadAverage("1. 2").has_value());
}

TEST(HostMetricsTest, MemInfoIsReadInBytes) {
  std::optional<MemInfo> m =
      ParseMemInfo("MemTotal:       16000 kB\nMemFree: 1 kB\nMemAvailable:    8000 kB\n");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->total_bytes, 16000 * 1024);
  EXPECT_EQ(m->available_bytes, 8000 * 1024);
  EXPECT_FALSE(ParseMemInfo("MemTotal: 1 kB\n").has_value());
}

TEST(HostMetricsTest, MeasuresFromAProcTreeAndTheStateFilesystem) {
  char tmpl[] = "/tmp/agent-proc-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/loadavg") << "1.50 1.00 0.50 1/100 42\n";
  std::ofstream(dir + "/meminfo") << "MemTotal: 2048 kB\nMemAvailable: 1024 kB\n";
  ProcHostMetrics host(dir, dir);
  wire::HostMetrics m = host.Measure();
  EXPECT_GE(m.cpu_cores, 1);
  EXPECT_EQ(m.load_1m, "1.50");
  EXPECT_EQ(m.memory_total_bytes, 2048 * 1024);
  EXPECT_EQ(m.memory_available_bytes, 1024 * 1024);
  EXPECT_GT(m.disk_total_bytes, 0);
  EXPECT_EQ(m.sandboxes_active, 0);
  if (system(("rm -rf " + dir).c_str()) != 0) {}
}

TEST(HostMetricsTest, RealProcGivesPlausibleValues) {
  ProcHostMetrics host("/tmp");
  wire::HostMetrics m = host.Measure();
  EXPECT_GT(m.memory_total_bytes, 0);
  EXPECT_LE(m.memory_available_bytes, m.memory_total_bytes);
  EXPECT_FALSE(m.load_1m.empty());
}

}  // namespace
}  // namespace sn::agent

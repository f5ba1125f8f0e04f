// Health reports: a fresh probe each time, fixed codes only, host measurements from /proc.
#include <stdlib.h>

#include <fstream>

#include "agent/health/host_metrics.h"
#include "agent/health/probe_health.h"
#include "agent/privhelper_rpc/privhelper_client.h"
#include "gtest/gtest.h"

namespace sn::agent {
namespace {

constexpr char kInst[] = "22222222-2222-4222-8222-222222222222";
const std::string kDigest(64, 'd');

// privhelper's answer for a healthy node: ready, holding generation 7, with its limits and
// this installation's counts.
GenerationReport Ready7() { return {7, kDigest, HeldState::kReady, std::nullopt}; }

ProbeOutcome Ready() {
  ProbeOutcome o;
  o.ready = true;
  o.backend_fingerprint = "docker/20.10 overlay2";
  o.provider = "docker";
  o.installation_id = kInst;
  o.limits = ProviderLimits{16, 64};
  o.sandboxes = SandboxCounts{3, 2};
  o.generations = {Ready7()};
  return o;
}

class FakeProber final : public ProviderProber {
 public:
  void Probe(int64_t generation,
             std::function<void(absl::StatusOr<ProbeOutcome>)> done) override {
    ++probes;
    last_generation = generation;
    done(next);
  }
  absl::StatusOr<ProbeOutcome> next = Ready();
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

class ProbeHealthTest : public ::testing::Test {
 protected:
  HealthReport CollectOne() {
    HealthReport got;
    bool called = false;
    source_.Collect([&](HealthReport r) {
      got = std::move(r);
      called = true;
    });
    EXPECT_TRUE(called);
    return got;
  }

  FakeProber prober_;
  FixedHost host_;
  SimulatedClock clock_{absl::FromUnixSeconds(1795000000)};
  int probes_seen_ = 0;
  Diagnostic not_held_ = Diagnostic::kProviderUnavailable;
  ProbeHealthSource source_{&prober_,
                            &host_,
                            &clock_,
                            EnrolledProvider{7, kDigest, kInst, false},
                            [this](const ProbeOutcome&) { ++probes_seen_; },
                            [this] { return not_held_; },
                            [this](Diagnostic d) { failed_probes_.push_back(d); }};
  std::vector<Diagnostic> failed_probes_;  // what the generation manager was told
};

TEST_F(ProbeHealthTest, EveryReportProbesAgain) {
  HealthReport first = CollectOne();
  HealthReport second = CollectOne();
  EXPECT_EQ(prober_.probes, 2);
  EXPECT_EQ(prober_.last_generation, 7);
  EXPECT_EQ(first.health.provider_ready, std::optional<bool>(true));
  EXPECT_FALSE(first.health.diagnostic.has_value());
  EXPECT_EQ(first.backend_fingerprint, "docker/20.10 overlay2");
  EXPECT_EQ(first.health.observed_at, "2026-11-18T11:06:40.000Z");
  EXPECT_EQ(first.health.host.cpu_cores, 4);
  EXPECT_EQ(first.limits, std::optional<ProviderLimits>(ProviderLimits{16, 64}));
  EXPECT_EQ(second.health.provider_ready, std::optional<bool>(true));
  EXPECT_EQ(probes_seen_, 2);  // the generation manager sees every probe
}

TEST_F(ProbeHealthTest, UnreadyProviderReportsItsFixedCode) {
  ProbeOutcome o = Ready();
  o.ready = false;
  o.diagnostic = Diagnostic::kDaemonUnreachable;
  prober_.next = o;
  HealthReport got = CollectOne();
  EXPECT_EQ(got.health.provider_ready, std::optional<bool>(false));
  EXPECT_EQ(got.health.diagnostic, std::optional<std::string>("daemon_unreachable"));
}

TEST_F(ProbeHealthTest, UnreachablePrivhelperIsProviderUnavailableWithoutItsText) {
  prober_.next = absl::UnavailableError("connect to /run/secret/path.sock failed");
  HealthReport got = CollectOne();
  EXPECT_EQ(got.health.provider_ready, std::optional<bool>(false));
  EXPECT_EQ(got.health.diagnostic, std::optional<std::string>("provider_unavailable"));
  EXPECT_TRUE(got.backend_fingerprint.empty());
  EXPECT_FALSE(got.limits.has_value());
  // The generation manager keeps its reports but takes no generation as ready (20a).
  EXPECT_EQ(probes_seen_, 0);
  EXPECT_EQ(failed_probes_, std::vector<Diagnostic>{Diagnostic::kProviderUnavailable});
}

TEST_F(ProbeHealthTest, PrivhelperOwningAnotherInstallationIsOwnershipRefused) {
  ProbeOutcome o = Ready();
  o.installation_id = "33333333-3333-4333-8333-333333333333";
  o.sandboxes = SandboxCounts{40, 50};
  prober_.next = o;
  HealthReport got = CollectOne();
  EXPECT_EQ(got.health.provider_ready, std::optional<bool>(false));
  EXPECT_EQ(got.health.diagnostic, std::optional<std::string>("ownership_refused"));
  // Another installation's counts and limits are not this node's.
  EXPECT_EQ(got.health.host.sandboxes_active, 0);
  EXPECT_FALSE(got.limits.has_value());
  EXPECT_EQ(failed_probes_, std::vector<Diagnostic>{Diagnostic::kOwnershipRefused});
}

// Finding 12: the host counts are this installation's, from privhelper's probe.
TEST_F(ProbeHealthTest, SandboxCountsComeFromThePrivhelperProbe) {
  HealthReport got = CollectOne();
  EXPECT_EQ(got.health.host.sandboxes_active, 3);
  EXPECT_EQ(got.health.host.sandboxes_retained, 2);
  ProbeOutcome o = Ready();
  o.sandboxes = SandboxCounts{5, 0};
  prober_.next = o;
  got = CollectOne();
  EXPECT_EQ(got.health.host.sandboxes_active, 5);
  EXPECT_EQ(got.health.host.sandboxes_retained, 0);
}

TEST_F(ProbeHealthTest, AProbeThatCouldNotCountReportsTheLastCountedValues) {
  ProbeOutcome uncounted = Ready();
  uncounted.sandboxes.reset();
  prober_.next = uncounted;
  HealthReport got = CollectOne();  // nothing counted yet in this process
  EXPECT_EQ(got.health.host.sandboxes_active, 0);
  EXPECT_EQ(got.health.host.sandboxes_retained, 0);
  prober_.next = Ready();
  CollectOne();  // counts 3 / 2
  prober_.next = uncounted;
  got = CollectOne();
  EXPECT_EQ(got.health.host.sandboxes_active, 3);
  EXPECT_EQ(got.health.host.sandboxes_retained, 2);
  prober_.next = absl::UnavailableError("gone");
  got = CollectOne();
  EXPECT_EQ(got.health.host.sandboxes_active, 3);
  EXPECT_EQ(got.health.host.sandboxes_retained, 2);
}

TEST_F(ProbeHealthTest, PrivhelperNotHoldingTheEnrolledGenerationIsUnreadyWithThePreparationsCode) {
  for (std::vector<GenerationReport> held :
       {std::vector<GenerationReport>{},
        std::vector<GenerationReport>{{7, std::string(64, 'e'), HeldState::kReady, std::nullopt}},
        std::vector<GenerationReport>{{8, kDigest, HeldState::kReady, std::nullopt}},
        std::vector<GenerationReport>{{7, kDigest, HeldState::kPreparing, std::nullopt}}}) {
    ProbeOutcome o = Ready();
    o.generations = held;
    prober_.next = o;
    HealthReport got = CollectOne();
    EXPECT_EQ(got.health.provider_ready, std::optional<bool>(false));
    EXPECT_EQ(got.health.diagnostic, std::optional<std::string>("provider_unavailable"));
  }
  EXPECT_EQ(probes_seen_, 4);  // each went to the generation manager, which prepares it again
  // Its preparation failed: the health says why.
  not_held_ = Diagnostic::kRuntimeDownloadFailed;
  ProbeOutcome o = Ready();
  o.generations.clear();
  prober_.next = o;
  EXPECT_EQ(CollectOne().health.diagnostic,
            std::optional<std::string>("runtime_download_failed"));
  // A generation privhelper reports READY (issue 9's report) is held.
  o.generations = {GenerationReport{7, kDigest, HeldState::kReady, std::nullopt}};
  prober_.next = o;
  EXPECT_EQ(CollectOne().health.provider_ready, std::optional<bool>(true));
}

TEST_F(ProbeHealthTest, GenerationManagingNodeProbesNoGenerationAndSkipsTheEnrolledCheck) {
  ProbeHealthSource gm(&prober_, &host_, &clock_, EnrolledProvider{7, kDigest, kInst, true});
  ProbeOutcome o = Ready();
  o.generations.clear();  // e.g. the enrolled generation was collected
  prober_.next = o;
  HealthReport got;
  gm.Collect([&](HealthReport r) { got = std::move(r); });
  EXPECT_EQ(prober_.last_generation, 0);
  EXPECT_EQ(got.health.provider_ready, std::optional<bool>(true));  // dropped by Connection
}

TEST_F(ProbeHealthTest, LimitsOutsideTheSpecRangesAreNotReported) {
  ProbeOutcome o = Ready();
  o.limits = ProviderLimits{0, 0};  // an older privhelper reports none
  prober_.next = o;
  EXPECT_FALSE(CollectOne().limits.has_value());
  o.limits = ProviderLimits{100001, 5};
  prober_.next = o;
  EXPECT_FALSE(CollectOne().limits.has_value());
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

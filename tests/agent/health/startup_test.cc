// `agent run`'s start-up against privhelper (startup.h), on SimulatedClock with a fake
// privhelper: retry while unreachable, refuse another installation or provider, hand on the
// accepted probe (its generation reports go to the generation manager, which prepares what is
// missing: tests/agent/generations/manager_test.cc). It never registers anything.
#include "agent/health/startup.h"

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sn::agent {
namespace {

constexpr char kInst[] = "22222222-2222-4222-8222-222222222222";
const std::string kDigest(64, 'd');

// privhelper's answer holding (READY) each of `held`.
ProbeOutcome Answer(std::vector<GenerationRef> held) {
  ProbeOutcome o;
  o.ready = true;
  o.provider = "docker";
  o.installation_id = kInst;
  o.backend_fingerprint = "docker/20.10.24";
  o.limits = ProviderLimits{4, 8};
  for (const GenerationRef& h : held) {
    o.generations.push_back(
        GenerationReport{h.generation, h.specification_digest, HeldState::kReady, std::nullopt});
  }
  return o;
}

class FakePrivhelper final : public ProviderProber {
 public:
  void Probe(int64_t generation,
             std::function<void(absl::StatusOr<ProbeOutcome>)> done) override {
    probed_generations.push_back(generation);
    absl::StatusOr<ProbeOutcome> next = probes.empty()
                                            ? absl::StatusOr<ProbeOutcome>(Answer({{7, kDigest}}))
                                            : probes.front();
    if (!probes.empty()) probes.pop_front();
    done(std::move(next));
  }
  std::deque<absl::StatusOr<ProbeOutcome>> probes;
  std::vector<int64_t> probed_generations;
};

class StartupTest : public ::testing::Test {
 protected:
  StartupTest() {
    inputs_.installation_id = kInst;
    inputs_.provider = "docker";
  }
  void Run() {
    // random 1.0: every delay is the full ceiling (1 s, 2 s, 4 s, ... capped at 15 s).
    startup_ = std::make_unique<PrivhelperStartup>(
        inputs_, &privhelper_, &clock_,
        Backoff([] { return 1.0; }, kPrivhelperRetryInitial, kPrivhelperRetryCap));
    startup_->Run([this](absl::StatusOr<StartupFacts> r) {
      ++calls_;
      result_ = std::move(r);
    });
  }

  StartupInputs inputs_;
  SimulatedClock clock_;
  FakePrivhelper privhelper_;
  std::unique_ptr<PrivhelperStartup> startup_;
  std::optional<absl::StatusOr<StartupFacts>> result_;
  int calls_ = 0;
};

TEST_F(StartupTest, AcceptedProbeGivesPrivhelpersLimitsAndItsGenerationReports) {
  Run();
  ASSERT_TRUE(result_.has_value());
  ASSERT_TRUE(result_->ok()) << result_->status();
  EXPECT_EQ((*result_)->limits, (ProviderLimits{4, 8}));
  EXPECT_EQ((*result_)->backend_fingerprint, "docker/20.10.24");
  EXPECT_TRUE((*result_)->probe.Holds(7, kDigest));
  // The probe names no generation.
  EXPECT_EQ(privhelper_.probed_generations, std::vector<int64_t>{0});
}

// Whether privhelper holds the enrolled generation is not start-up's business any more: the
// generation manager prepares it (the same path as `agent enroll`).
TEST_F(StartupTest, AGenerationPrivhelperDoesNotHoldDoesNotStopTheStart) {
  privhelper_.probes.push_back(Answer({}));
  Run();
  ASSERT_TRUE(result_.has_value());
  EXPECT_TRUE(result_->ok()) << result_->status();
  EXPECT_FALSE((*result_)->probe.Holds(7, kDigest));
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

TEST_F(StartupTest, UnreachablePrivhelperIsProbedAgainWithABoundedBackoff) {
  for (int i = 0; i < 6; ++i) privhelper_.probes.push_back(absl::UnavailableError("no socket"));
  Run();
  EXPECT_FALSE(result_.has_value());
  absl::Duration waited;
  for (absl::Duration expected : {absl::Seconds(1), absl::Seconds(2), absl::Seconds(4),
                                  absl::Seconds(8), absl::Seconds(15), absl::Seconds(15)}) {
    const size_t before = privhelper_.probed_generations.size();
    clock_.Advance(expected - absl::Milliseconds(1));
    EXPECT_EQ(privhelper_.probed_generations.size(), before) << "too early";
    clock_.Advance(absl::Milliseconds(1));
    EXPECT_EQ(privhelper_.probed_generations.size(), before + 1) << expected;
    waited += expected;
  }
  ASSERT_TRUE(result_.has_value());  // the seventh probe answered
  EXPECT_TRUE(result_->ok()) << result_->status();
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(waited, absl::Seconds(45));
}

TEST_F(StartupTest, PrivhelperOfAnotherInstallationIsRefusedWithoutRetrying) {
  ProbeOutcome other = Answer({{7, kDigest}});
  other.installation_id = "33333333-3333-4333-8333-333333333333";
  privhelper_.probes.push_back(other);
  Run();
  ASSERT_TRUE(result_.has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(result_->status())) << result_->status();
  const std::string message(result_->status().message());
  EXPECT_NE(message.find(kInst), std::string::npos);
  EXPECT_NE(message.find("33333333-3333-4333-8333-333333333333"), std::string::npos);
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

TEST_F(StartupTest, AnotherProviderOrLimitsOutsideTheSpecAreRefused) {
  ProbeOutcome other = Answer({{7, kDigest}});
  other.provider = "microvm";
  privhelper_.probes.push_back(other);
  Run();
  EXPECT_TRUE(absl::IsFailedPrecondition(result_->status())) << result_->status();

  ProbeOutcome old = Answer({{7, kDigest}});
  old.limits = ProviderLimits{0, 0};  // a privhelper from before the limits moved to it
  privhelper_.probes.push_back(old);
  Run();
  EXPECT_TRUE(absl::IsFailedPrecondition(result_->status())) << result_->status();
  EXPECT_NE(std::string(result_->status().message()).find("max_active"), std::string::npos);
}

TEST_F(StartupTest, DestroyedBeforeAnAnswerNeverCallsBack) {
  privhelper_.probes.push_back(absl::UnavailableError("no socket"));
  Run();
  startup_.reset();
  clock_.Advance(absl::Minutes(5));
  EXPECT_EQ(calls_, 0);
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

}  // namespace
}  // namespace sn::agent

// `agent run`'s start-up against privhelper (startup.h), on SimulatedClock with a fake
// privhelper: retry while unreachable, refuse another installation, register the enrolled
// generation when privhelper does not hold it.
#include "agent/startup.h"

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sn::agent {
namespace {

constexpr char kInst[] = "22222222-2222-4222-8222-222222222222";
const std::string kDigest(64, 'd');
constexpr char kSpec[] = "{\"schema\":1}";

ProbeOutcome Answer(std::vector<HeldGeneration> held) {
  ProbeOutcome o;
  o.ready = true;
  o.provider = "docker";
  o.installation_id = kInst;
  o.backend_fingerprint = "docker/20.10.24";
  o.limits = ProviderLimits{4, 8};
  o.held_generations = std::move(held);
  return o;
}

struct Registration {
  int64_t generation;
  std::string specification;
  std::string digest;
};

class FakePrivhelper final : public ProviderProber, public GenerationRegistrar {
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
  void Register(int64_t generation, std::string specification, std::string digest,
                std::function<void(absl::Status)> done) override {
    registrations.push_back({generation, std::move(specification), std::move(digest)});
    absl::Status st = register_results.empty() ? absl::OkStatus() : register_results.front();
    if (!register_results.empty()) register_results.pop_front();
    done(st);
  }
  std::deque<absl::StatusOr<ProbeOutcome>> probes;
  std::deque<absl::Status> register_results;
  std::vector<int64_t> probed_generations;
  std::vector<Registration> registrations;
};

class StartupTest : public ::testing::Test {
 protected:
  StartupTest() {
    inputs_.installation_id = kInst;
    inputs_.provider = "docker";
    inputs_.generation = 7;
    inputs_.specification_digest = kDigest;
    inputs_.specification = kSpec;
  }
  void Run() {
    // random 1.0: every delay is the full ceiling (1 s, 2 s, 4 s, ... capped at 15 s).
    startup_ = std::make_unique<PrivhelperStartup>(
        inputs_, &privhelper_, &privhelper_, &clock_,
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

TEST_F(StartupTest, HeldGenerationNeedsNoRegistrationAndGivesPrivhelpersLimits) {
  Run();
  ASSERT_TRUE(result_.has_value());
  ASSERT_TRUE(result_->ok()) << result_->status();
  EXPECT_EQ((*result_)->limits, (ProviderLimits{4, 8}));
  EXPECT_EQ((*result_)->backend_fingerprint, "docker/20.10.24");
  EXPECT_FALSE((*result_)->registered);
  EXPECT_TRUE(privhelper_.registrations.empty());
  // Before registration there is no generation to name: the probe names none.
  EXPECT_EQ(privhelper_.probed_generations, std::vector<int64_t>{0});
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
  EXPECT_TRUE(privhelper_.registrations.empty());
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

TEST_F(StartupTest, GenerationPrivhelperDoesNotHoldIsRegisteredFromTheStoredSpecification) {
  privhelper_.probes.push_back(Answer({}));
  Run();
  ASSERT_EQ(privhelper_.registrations.size(), 1u);
  EXPECT_EQ(privhelper_.registrations[0].generation, 7);
  EXPECT_EQ(privhelper_.registrations[0].specification, kSpec);
  EXPECT_EQ(privhelper_.registrations[0].digest, kDigest);
  ASSERT_TRUE(result_->ok()) << result_->status();
  EXPECT_TRUE((*result_)->registered);
  EXPECT_EQ((*result_)->limits, (ProviderLimits{4, 8}));
}

TEST_F(StartupTest, SameGenerationWithAnotherDigestIsRegisteredAndPrivhelpersRefusalStopsStart) {
  privhelper_.probes.push_back(Answer({{7, std::string(64, 'e')}}));
  privhelper_.register_results.push_back(
      absl::FailedPreconditionError("privhelper holds another generation"));
  Run();
  ASSERT_EQ(privhelper_.registrations.size(), 1u);  // privhelper decides, not the agent
  ASSERT_TRUE(result_.has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(result_->status())) << result_->status();
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

TEST_F(StartupTest, PrivhelperGoneDuringRegistrationIsRetriedFromTheProbe) {
  privhelper_.probes.push_back(Answer({}));
  privhelper_.register_results.push_back(absl::UnavailableError("connection reset"));
  Run();
  EXPECT_FALSE(result_.has_value());
  clock_.Advance(absl::Seconds(1));  // probes again: now it holds the generation
  ASSERT_TRUE(result_.has_value());
  EXPECT_TRUE(result_->ok()) << result_->status();
  EXPECT_EQ(privhelper_.probed_generations.size(), 2u);
  EXPECT_EQ(privhelper_.registrations.size(), 1u);
}

TEST_F(StartupTest, MissingSpecificationOnlyMattersWhenPrivhelperDoesNotHoldTheGeneration) {
  inputs_.specification.reset();
  inputs_.specification_problem = "generations/7.spec.json: not found";
  Run();
  EXPECT_TRUE(result_->ok()) << result_->status();  // held: nothing to register

  privhelper_.probes.push_back(Answer({}));
  Run();
  EXPECT_TRUE(absl::IsFailedPrecondition(result_->status())) << result_->status();
  EXPECT_NE(std::string(result_->status().message()).find("not found"), std::string::npos);
  EXPECT_TRUE(privhelper_.registrations.empty());
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

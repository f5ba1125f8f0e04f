// The generation manager on SimulatedClock with a fake preparer and pin store: when it
// prepares what, how the serving pin moves, what it observes, and which generation a request
// runs on (spec/wire.md §3, §4).
#include "agent/generations/manager.h"

#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

#include "agent/generations/pins.h"
#include "gtest/gtest.h"
#include "tests/agent/fakes/fake_preparer.h"
#include "tests/agent/fakes/test_support.h"

namespace sn::agent {
namespace {

using testing::FakePreparer;
using testing::MemoryPins;

const std::string kA(64, 'a');
const std::string kB(64, 'b');
const std::string kC(64, 'c');

GenerationReport Ready(int64_t g, const std::string& d) {
  return GenerationReport{g, d, HeldState::kReady, std::nullopt};
}
GenerationReport Preparing(int64_t g, const std::string& d) {
  return GenerationReport{g, d, HeldState::kPreparing, std::nullopt};
}
GenerationReport Failed(int64_t g, const std::string& d, Diagnostic diag) {
  return GenerationReport{g, d, HeldState::kFailed, diag};
}
GenerationReport NeedsRepair(int64_t g, const std::string& d, Diagnostic missing) {
  return GenerationReport{g, d, HeldState::kNeedsRepair, missing};
}

wire::Deployment Facts(int64_t target, const std::string& digest,
                       std::optional<int64_t> serving = std::nullopt) {
  return wire::Deployment{target, digest, serving};
}

wire::Request Request(int64_t generation, wire::Operation op, std::string image = "busybox") {
  wire::Request r;
  r.generation = generation;
  r.operation = op;
  switch (op) {
    case wire::Operation::kCreate:
      r.args = wire::CreateArgs{"s", std::move(image), std::nullopt, std::nullopt, 1, 1};
      break;
    case wire::Operation::kResume:
      r.args = wire::ResumeArgs{"s", false};
      break;
    default:
      r.args = wire::SandboxArgs{"s"};
  }
  return r;
}

std::string Describe(const std::vector<wire::Observation>& obs) {
  std::string s;
  for (const wire::Observation& o : obs) {
    s += std::to_string(o.generation) + ":" +
         (o.state == wire::GenerationState::kReady       ? "ready"
          : o.state == wire::GenerationState::kPreparing ? "preparing"
                                                         : "failed") +
         (o.diagnostic ? "(" + *o.diagnostic + ")" : "") + " ";
  }
  return s;
}

class ManagerTest : public ::testing::Test {
 protected:
  void Make(bool generation_management, GenerationRef enrolled = {1, kA}) {
    GenerationManagerOptions o;
    o.generation_management = generation_management;
    o.enrolled = enrolled;
    manager_ = std::make_unique<GenerationManager>(
        o, &clock_, &clock_, &pins_, &preparer_,
        [this](const GenerationRef& ref) -> std::optional<std::set<std::string>> {
          auto it = specs_.find(ref.generation);
          if (it == specs_.end()) return std::nullopt;
          return it->second;
        },
        [this](const PreparationJob& job, const PreparationProgress&,
               const std::optional<PreparationOutcome>& finished) {
          if (finished.has_value()) recorded_.push_back(job.ref.generation);
        });
    ASSERT_TRUE(manager_->Start().ok());
  }
  GenerationManager& m() { return *manager_; }

  SimulatedClock clock_;
  FakePreparer preparer_;
  MemoryPins pins_;
  std::map<int64_t, std::set<std::string>> specs_;
  std::vector<int64_t> recorded_;
  std::unique_ptr<GenerationManager> manager_;
};

// ---- what is prepared, and when --------------------------------------------------------------

TEST_F(ManagerTest, GenerationManagingNodePreparesNothingBeforeTheConnectionDeliveredFacts) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA)});
  EXPECT_TRUE(preparer_.attempts.empty());
  m().OnDeployment(Facts(2, kB));
  ASSERT_EQ(preparer_.attempts.size(), 1u);
  EXPECT_EQ(preparer_.last().job, (PreparationJob{{2, kB}, JobRole::kTarget}));
}

TEST_F(ManagerTest, NothingIsPreparedBeforePrivhelpersFirstReport) {
  Make(false);
  EXPECT_TRUE(preparer_.attempts.empty());  // privhelper may hold it: not known yet
  m().OnGenerationReports({});
  ASSERT_EQ(preparer_.attempts.size(), 1u);
  EXPECT_EQ(preparer_.last().job.ref, (GenerationRef{1, kA}));
}

TEST_F(ManagerTest, NodeWithoutGenerationManagementPreparesItsEnrolledGenerationWhenNotReady) {
  Make(false);
  m().OnGenerationReports({Ready(1, kA)});
  EXPECT_TRUE(preparer_.attempts.empty());
  m().OnGenerationReports({});  // privhelper's state was lost
  ASSERT_EQ(preparer_.attempts.size(), 1u);
  m().OnDisconnected();  // no deployment facts needed, and a lost connection changes nothing
  EXPECT_FALSE(preparer_.last().cancelled);
  preparer_.Fail(Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(m().EnrolledNotHeldDiagnostic(), Diagnostic::kRuntimeDownloadFailed);
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(preparer_.attempts.size(), 2u);
  preparer_.Succeed();
  EXPECT_TRUE(m().DigestOf(1).has_value());
}

TEST_F(ManagerTest, AnInterruptedPlanOfTheTargetIsResumed) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA), Preparing(2, kB)});
  m().OnDeployment(Facts(2, kB));
  ASSERT_EQ(preparer_.attempts.size(), 1u);
  EXPECT_EQ(preparer_.last().job.ref, (GenerationRef{2, kB}));
}

TEST_F(ManagerTest, TargetHeldWithAnotherDigestIsFailedConfigurationInvalidAndNeverPrepared) {
  Make(true);
  m().OnGenerationReports({Ready(2, kC)});
  m().OnDeployment(Facts(2, kB));
  EXPECT_TRUE(preparer_.attempts.empty());
  std::vector<wire::Observation> obs = m().NextObservations();
  ASSERT_EQ(obs.size(), 1u) << Describe(obs);  // the held copy is not reported beside it
  EXPECT_EQ(obs[0].specification_digest, kB);
  EXPECT_EQ(obs[0].state, wire::GenerationState::kFailed);
  EXPECT_EQ(obs[0].diagnostic, std::optional<std::string>("configuration_invalid"));
  // And no request runs on Core's generation 2 here: it is not the one held.
  specs_[2] = {"busybox"};
  EXPECT_EQ(m().Admit(Request(2, wire::Operation::kInspect)), GateAnswer::kUnconfirmed);
}

TEST_F(ManagerTest, TargetPrivhelperRefusedIsFailedWithItsDiagnosticAndNeverPrepared) {
  Make(true);
  m().OnGenerationReports({Failed(2, kB, Diagnostic::kOwnershipRefused)});
  m().OnDeployment(Facts(2, kB));
  EXPECT_TRUE(preparer_.attempts.empty());
  EXPECT_EQ(Describe(m().NextObservations()), "2:failed(ownership_refused) ");
}

TEST_F(ManagerTest, AnAttemptThatLeavesTheGenerationFailedIsNotRetried) {
  Make(true);
  m().OnGenerationReports({});
  m().OnDeployment(Facts(2, kB));
  preparer_.Fail(Diagnostic::kOwnershipRefused, HeldState::kFailed);
  clock_.Advance(absl::Hours(2));
  EXPECT_EQ(preparer_.attempts.size(), 1u);
  EXPECT_EQ(Describe(m().NextObservations()), "2:failed(ownership_refused) ");
}

TEST_F(ManagerTest, ASupersededTargetIsCancelledAndItsPlanStaysVisibleAsCancelled) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA)});
  m().OnDeployment(Facts(2, kB, 1));
  m().OnGenerationReports({Ready(1, kA), Preparing(2, kB)});
  m().OnDeployment(Facts(3, kC, 1));
  EXPECT_TRUE(preparer_.attempts[0]->cancelled);
  preparer_.Fail(Diagnostic::kPreparationCancelled);
  ASSERT_EQ(preparer_.attempts.size(), 2u);
  EXPECT_EQ(preparer_.last().job.ref.generation, 3);
  EXPECT_EQ(Describe(m().NextObservations()),
            "3:preparing 1:ready 2:failed(preparation_cancelled) ");
}

TEST_F(ManagerTest, ALostConnectionCancelsThePreparationAndTheNextFactsResumeIt) {
  Make(true);
  m().OnGenerationReports({});
  m().OnDeployment(Facts(2, kB));
  m().OnDisconnected();
  EXPECT_TRUE(preparer_.last().cancelled);
  preparer_.Fail(Diagnostic::kPreparationCancelled);
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(preparer_.attempts.size(), 1u);  // nothing without facts
  // The next hello still leads with the pinned target.
  EXPECT_EQ(Describe(m().NextObservations()), "2:preparing ");
  m().OnDeployment(Facts(2, kB));
  EXPECT_EQ(preparer_.attempts.size(), 2u);  // a cancellation is no failure: at once
}

TEST_F(ManagerTest, TheServingGenerationIsPreparedAgainAfterTheTarget) {
  pins_.stored.serving = GenerationRef{1, kA};
  Make(true);
  m().OnGenerationReports({});  // privhelper lost everything
  m().OnDeployment(Facts(2, kB, 1));
  ASSERT_EQ(preparer_.attempts.size(), 1u);
  EXPECT_EQ(preparer_.last().job.role, JobRole::kTarget);
  preparer_.Succeed();
  ASSERT_EQ(preparer_.attempts.size(), 2u);
  EXPECT_EQ(preparer_.last().job, (PreparationJob{{1, kA}, JobRole::kServing}));
}

TEST_F(ManagerTest, RequestedPreparationsComeAfterTargetAndServing) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA)});
  m().RequestPreparation(GenerationRef{5, kC});
  EXPECT_TRUE(preparer_.attempts.empty());  // not before facts
  m().OnDeployment(Facts(2, kB, 1));
  EXPECT_EQ(preparer_.last().job.ref.generation, 2);
  preparer_.Succeed();
  EXPECT_EQ(preparer_.last().job, (PreparationJob{{5, kC}, JobRole::kOther}));
  preparer_.Succeed();
  m().OnGenerationReports({Ready(1, kA), Ready(2, kB), Ready(5, kC)});
  EXPECT_EQ(preparer_.attempts.size(), 2u);
}

// ---- the serving pin -------------------------------------------------------------------------

TEST_F(ManagerTest, ServingPinMovesOnlyToAGenerationReadyLocallyAndNullLeavesIt) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA)});
  m().OnDeployment(Facts(1, kA, 1));
  EXPECT_EQ(m().pins().serving, (std::optional<GenerationRef>(GenerationRef{1, kA})));
  EXPECT_EQ(pins_.stored.serving, m().pins().serving);  // durable
  EXPECT_EQ(pins_.stored.target, (std::optional<GenerationRef>(GenerationRef{1, kA})));

  m().OnDeployment(Facts(2, kB, 2));  // Core names 2 before it is ready here
  EXPECT_EQ(m().pins().serving->generation, 1);
  EXPECT_EQ(pins_.stored.target->generation, 2);
  preparer_.Succeed();  // now it is
  EXPECT_EQ(m().pins().serving, (std::optional<GenerationRef>(GenerationRef{2, kB})));
  EXPECT_EQ(pins_.stored.serving->generation, 2);

  m().OnDeployment(Facts(2, kB, std::nullopt));  // null leaves the pin
  EXPECT_EQ(m().pins().serving->generation, 2);
  m().OnDeployment(Facts(3, kC, 7));  // a generation the node does not hold
  EXPECT_EQ(m().pins().serving->generation, 2);
}

TEST_F(ManagerTest, ServingPinDoesNotMoveToTheTargetsNumberHeldWithAnotherDigest) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA), Ready(2, kC)});
  m().OnDeployment(Facts(2, kB, 2));
  EXPECT_FALSE(m().pins().serving.has_value());
}

TEST_F(ManagerTest, APinThatCannotBePersistedDoesNotMove) {
  Make(true);
  pins_.fail = absl::InternalError("disk full");
  m().OnGenerationReports({Ready(1, kA)});
  m().OnDeployment(Facts(1, kA, 1));
  EXPECT_FALSE(m().pins().serving.has_value());
  pins_.fail = absl::OkStatus();
  m().OnDeployment(Facts(1, kA, 1));  // the next facts try again
  EXPECT_EQ(m().pins().serving->generation, 1);
}

TEST_F(ManagerTest, PinsSurviveARestartAndLeadTheFirstHello) {
  char tmpl[] = "/tmp/agent-pins-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  {
    FilePinStore store(dir + "/deployment.json");
    GenerationManagerOptions o;
    o.generation_management = true;
    o.enrolled = {1, kA};
    GenerationManager before(o, &clock_, &clock_, &store, &preparer_, nullptr);
    ASSERT_TRUE(before.Start().ok());
    before.OnGenerationReports({Ready(1, kA), Ready(2, kB)});
    before.OnDeployment(Facts(3, kC, 2));
  }
  FilePinStore store(dir + "/deployment.json");
  GenerationManagerOptions o;
  o.generation_management = true;
  o.enrolled = {1, kA};
  GenerationManager after(o, &clock_, &clock_, &store, &preparer_, nullptr);
  ASSERT_TRUE(after.Start().ok());
  after.OnGenerationReports({Ready(1, kA), Ready(2, kB)});
  EXPECT_EQ(Describe(after.NextObservations()), "3:preparing 2:ready 1:ready ");
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

TEST_F(ManagerTest, ATornPinFileRefusesTheStart) {
  char tmpl[] = "/tmp/agent-pins-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  ASSERT_EQ(system(("printf '{\"schema\":1,\"target\":7}' > " + dir + "/deployment.json").c_str()),
            0);
  FilePinStore store(dir + "/deployment.json");
  GenerationManager g(GenerationManagerOptions{true, {1, kA}}, &clock_, &clock_, &store,
                      &preparer_, nullptr);
  EXPECT_TRUE(absl::IsDataLoss(g.Start()));
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

// ---- observations ----------------------------------------------------------------------------

TEST_F(ManagerTest, ObservationsLeadWithTargetAndServingAndReportEveryState) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA), Ready(4, kA), Preparing(6, kB),
                           Failed(7, kC, Diagnostic::kOwnershipRefused)});
  m().OnDeployment(Facts(5, kB, 4));
  EXPECT_EQ(Describe(m().NextObservations()),
            "5:preparing 4:ready 1:ready 6:failed(preparation_cancelled) 7:failed(ownership_refused) ");
  preparer_.Fail(Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(m().NextObservations()[0].diagnostic,
            std::optional<std::string>("runtime_download_failed"));
  EXPECT_EQ(m().NextObservations()[0].state, wire::GenerationState::kFailed);
}

TEST_F(ManagerTest, AGenerationPrivhelperNoLongerListsIsNotReported) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA), Ready(2, kB), Ready(3, kC)});
  m().OnDeployment(Facts(3, kC, 3));
  EXPECT_EQ(Describe(m().NextObservations()), "3:ready 1:ready 2:ready ");
  m().OnGenerationReports({Ready(2, kB), Ready(3, kC)});  // 1 is being collected
  EXPECT_EQ(Describe(m().NextObservations()), "3:ready 2:ready ");
}

TEST_F(ManagerTest, AtMostEightObservationsAndEveryGenerationWithinCeilNOverSix) {
  Make(true);
  std::vector<GenerationReport> reports;
  for (int64_t g = 1; g <= 100; ++g) reports.push_back(Ready(g, kA));
  m().OnGenerationReports(reports);
  m().OnDeployment(Facts(100, kA, 99));
  std::set<int64_t> seen;
  for (int i = 0; i < 17; ++i) {  // ⌈100/6⌉
    std::vector<wire::Observation> obs = m().NextObservations();
    ASSERT_EQ(obs.size(), 8u);
    EXPECT_EQ(obs[0].generation, 100);
    EXPECT_EQ(obs[1].generation, 99);
    for (const wire::Observation& o : obs) seen.insert(o.generation);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST_F(ManagerTest, NodeWithoutGenerationManagementReportsNoObservations) {
  Make(false);
  m().OnGenerationReports({Ready(1, kA)});
  EXPECT_TRUE(m().NextObservations().empty());
}

// ---- requests (§4) ---------------------------------------------------------------------------

TEST_F(ManagerTest, ARequestRunsOnTheGenerationItNamesWhenHeld) {
  Make(true);
  specs_[1] = {"busybox"};
  specs_[2] = {"alpine"};
  m().OnGenerationReports({Ready(1, kA), Ready(2, kB), Preparing(3, kC),
                           Failed(4, kC, Diagnostic::kOwnershipRefused)});
  m().OnDeployment(Facts(2, kB, 1));
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate, "busybox")), GateAnswer::kRun);
  EXPECT_EQ(m().Admit(Request(2, wire::Operation::kCreate, "alpine")), GateAnswer::kRun);
  // The image check uses the named generation's specification.
  EXPECT_EQ(m().Admit(Request(2, wire::Operation::kCreate, "busybox")), GateAnswer::kInvalid);
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate, "alpine")), GateAnswer::kInvalid);
  // Not held: never prepared, only a plan, refused.
  for (int64_t g : {3, 4, 9}) {
    EXPECT_EQ(m().Admit(Request(g, wire::Operation::kInspect)), GateAnswer::kUnconfirmed) << g;
    EXPECT_EQ(m().Admit(Request(g, wire::Operation::kKill)), GateAnswer::kUnconfirmed) << g;
  }
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kKill)), GateAnswer::kRun);
  EXPECT_EQ(m().DigestOf(2), std::optional<std::string>(kB));
  EXPECT_EQ(m().DigestOf(3), std::nullopt);
}

TEST_F(ManagerTest, CreateAndAStartingResumeNeedTheGenerationReadyOthersRunWhileHeld) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA)});
  m().OnDeployment(Facts(2, kB, 1));
  // 2 is being prepared: nothing runs on it.
  EXPECT_EQ(m().Admit(Request(2, wire::Operation::kCreate)), GateAnswer::kUnconfirmed);
  wire::Request reconcile = Request(2, wire::Operation::kResume);
  std::get<wire::ResumeArgs>(reconcile.args).reconciliation_only = true;
  EXPECT_EQ(m().Admit(reconcile), GateAnswer::kUnconfirmed);
  // Held and ready.
  reconcile.generation = 1;
  EXPECT_EQ(m().Admit(reconcile), GateAnswer::kRun);
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kResume)), GateAnswer::kRun);
}

TEST_F(ManagerTest, CreateWithoutAVerifiedSpecificationIsUnconfirmed) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA)});
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kUnconfirmed);
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kInspect)), GateAnswer::kRun);
}

TEST_F(ManagerTest, APreparedGenerationServesAtOnceWithItsVerifiedImages) {
  Make(true);
  m().OnGenerationReports({});
  m().OnDeployment(Facts(2, kB));
  preparer_.Succeed({"alpine"});
  EXPECT_EQ(m().Admit(Request(2, wire::Operation::kCreate, "alpine")), GateAnswer::kRun);
  EXPECT_EQ(recorded_, std::vector<int64_t>{2});
  // A probe answered before the publication does not undo it.
  m().OnGenerationReports({Preparing(2, kB)});
  EXPECT_EQ(m().Admit(Request(2, wire::Operation::kCreate, "alpine")), GateAnswer::kRun);
  EXPECT_EQ(preparer_.attempts.size(), 1u);
}

TEST_F(ManagerTest, NodeWithoutGenerationManagementRunsOnlyItsEnrolledGeneration) {
  Make(false);
  specs_[1] = {"busybox"};
  m().OnGenerationReports({Ready(1, kA), Ready(2, kB)});
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kRun);
  EXPECT_EQ(m().Admit(Request(2, wire::Operation::kInspect)), GateAnswer::kUnconfirmed);
  m().OnGenerationReports({});
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kInspect)), GateAnswer::kUnconfirmed);
}

// ---- restart recovery and repair (issue 11) ----------------------------------------------------

TEST_F(ManagerTest, NodeWithoutGenerationManagementRepairsItsEnrolledGenerationWithoutFacts) {
  Make(false);
  specs_[1] = {"busybox"};
  m().OnGenerationReports({NeedsRepair(1, kA, Diagnostic::kRuntimeMissing)});
  ASSERT_EQ(preparer_.attempts.size(), 1u) << "no deployment facts needed";
  EXPECT_EQ(preparer_.last().job.ref, (GenerationRef{1, kA}));
  EXPECT_EQ(m().EnrolledNotHeldDiagnostic(), Diagnostic::kRuntimeMissing);
  // Held, not ready: everything but create and a starting resume runs meanwhile.
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kUnconfirmed);
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kResume)), GateAnswer::kUnconfirmed);
  wire::Request reconcile = Request(1, wire::Operation::kResume);
  std::get<wire::ResumeArgs>(reconcile.args).reconciliation_only = true;
  EXPECT_EQ(m().Admit(reconcile), GateAnswer::kRun);
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kKill)), GateAnswer::kRun);
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kInspect)), GateAnswer::kRun);
  preparer_.Succeed();
  m().OnGenerationReports({Ready(1, kA)});
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kRun);
  EXPECT_EQ(preparer_.attempts.size(), 1u);
}

TEST_F(ManagerTest, ARepairThatFailsBacksOffOneTwoFiveTenThenThirtyMinutes) {
  Make(false);
  m().OnGenerationReports({NeedsRepair(1, kA, Diagnostic::kImageMissing)});
  const int waits[] = {1, 2, 5, 10, 30, 30};
  for (int minutes : waits) {
    const size_t before = preparer_.attempts.size();
    // A lease a live helper holds: privhelper answers Unavailable, the agent retries later.
    preparer_.Fail(Diagnostic::kProviderUnavailable, HeldState::kNeedsRepair);
    EXPECT_EQ(m().EnrolledNotHeldDiagnostic(), Diagnostic::kImageMissing)
        << "health names what is missing while the repair waits";
    clock_.Advance(absl::Minutes(minutes) - absl::Seconds(1));
    EXPECT_EQ(preparer_.attempts.size(), before) << "retried before its " << minutes << " min";
    clock_.Advance(absl::Seconds(1));
    ASSERT_EQ(preparer_.attempts.size(), before + 1) << "not retried after " << minutes << " min";
  }
}

TEST_F(ManagerTest, ARepairAttemptEndsAtItsThirtyMinuteDeadline) {
  Make(false);
  m().OnGenerationReports({NeedsRepair(1, kA, Diagnostic::kRuntimeMissing)});
  ASSERT_EQ(preparer_.attempts.size(), 1u);
  clock_.Advance(absl::Minutes(30) - absl::Seconds(1));
  EXPECT_FALSE(preparer_.last().cancelled);
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(preparer_.last().cancelled);
  preparer_.Fail(Diagnostic::kPreparationCancelled, HeldState::kNeedsRepair);
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(preparer_.attempts.size(), 2u) << "a timeout counts as the first failure";
}

TEST_F(ManagerTest, GenerationManagingNodeRepairsAfterFactsAndAfterTheTargetNeverAdvertisingReady) {
  Make(true);
  m().OnGenerationReports({Ready(1, kA), NeedsRepair(2, kB, Diagnostic::kImageMissing)});
  EXPECT_TRUE(preparer_.attempts.empty()) << "nothing before the connection delivered facts";
  m().OnDeployment(Facts(3, kC, 1));
  ASSERT_EQ(preparer_.attempts.size(), 1u);
  EXPECT_EQ(preparer_.last().job.ref.generation, 3);
  EXPECT_EQ(Describe(m().NextObservations()), "3:preparing 1:ready 2:failed(image_missing) ");
  preparer_.Succeed();
  ASSERT_EQ(preparer_.attempts.size(), 2u);
  EXPECT_EQ(preparer_.last().job, (PreparationJob{{2, kB}, JobRole::kOther}));
  EXPECT_EQ(Describe(m().NextObservations()), "3:ready 1:ready 2:preparing ");
  // A refusal (conflicting bytes) is final: failed with privhelper's diagnostic, not retried.
  preparer_.Fail(Diagnostic::kConfigurationInvalid, HeldState::kFailed);
  EXPECT_EQ(Describe(m().NextObservations()), "3:ready 1:ready 2:failed(configuration_invalid) ");
  clock_.Advance(absl::Minutes(60));
  EXPECT_EQ(preparer_.attempts.size(), 2u);
}

TEST_F(ManagerTest, ATargetUnderRepairKeepsItsGenerationAndPinsAndIsNotServedUntilReady) {
  Make(true);
  specs_[1] = {"busybox"};
  m().OnGenerationReports({NeedsRepair(1, kA, Diagnostic::kRuntimeMissing)});
  m().OnDeployment(Facts(1, kA, 1));
  ASSERT_EQ(preparer_.attempts.size(), 1u);
  EXPECT_EQ(preparer_.last().job, (PreparationJob{{1, kA}, JobRole::kTarget}));
  EXPECT_FALSE(m().pins().serving.has_value()) << "the serving pin waits for READY";
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kUnconfirmed);
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kKill)), GateAnswer::kRun);
  preparer_.Fail(Diagnostic::kProviderUnavailable, HeldState::kNeedsRepair);
  EXPECT_EQ(Describe(m().NextObservations()), "1:failed(runtime_missing) ");
  clock_.Advance(absl::Minutes(1));
  preparer_.Succeed();
  EXPECT_EQ(Describe(m().NextObservations()), "1:ready ");
  ASSERT_TRUE(m().pins().serving.has_value());
  EXPECT_EQ(*m().pins().serving, (GenerationRef{1, kA}));
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kRun);
}

// docs/protocol.md 20a: after any start (a crash between a repair's stored bytes and its probe
// included) privhelper's records say READY before anything proved the provider works; the
// probe that reports them says whether it does, and only a passing one makes them ready.
TEST_F(ManagerTest, AReadyRecordIsNotReadyWhileTheSameProbesProviderCheckFails) {
  Make(true);
  specs_[1] = {"busybox"};
  m().OnGenerationReports({Ready(1, kA)}, Diagnostic::kDaemonUnreachable);
  m().OnDeployment(Facts(1, kA, 1));
  EXPECT_TRUE(preparer_.attempts.empty()) << "held: nothing to prepare or repair";
  EXPECT_EQ(Describe(m().NextObservations()), "1:failed(daemon_unreachable) ");
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kUnconfirmed);
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kResume)), GateAnswer::kUnconfirmed);
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kKill)), GateAnswer::kRun) << "still held";
  EXPECT_FALSE(m().pins().serving.has_value()) << "the serving pin waits for a passing probe";
  m().OnGenerationReports({Ready(1, kA)});  // the next probe passes
  EXPECT_EQ(Describe(m().NextObservations()), "1:ready ");
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kRun);
  ASSERT_TRUE(m().pins().serving.has_value());
  m().OnGenerationReports({Ready(1, kA)}, Diagnostic::kProviderUnavailable);  // down again
  EXPECT_EQ(Describe(m().NextObservations()), "1:failed(provider_unavailable) ");
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kUnconfirmed);
  EXPECT_EQ(m().pins().serving->generation, 1) << "a pin never moves back";
}

TEST_F(ManagerTest, WhilePrivhelperIsUnreachableItsLastReportsStayButNothingIsReady) {
  Make(true);
  specs_[1] = {"busybox"};
  m().OnGenerationReports({Ready(1, kA)});
  m().OnDeployment(Facts(1, kA, 1));
  EXPECT_EQ(Describe(m().NextObservations()), "1:ready ");
  m().OnProbeFailed(Diagnostic::kProviderUnavailable);  // privhelper restarting, say
  EXPECT_EQ(Describe(m().NextObservations()), "1:failed(provider_unavailable) ");
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kUnconfirmed);
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kKill)), GateAnswer::kRun);
  EXPECT_TRUE(preparer_.attempts.empty()) << "still held: nothing is prepared again";
  m().OnGenerationReports({Ready(1, kA)});
  EXPECT_EQ(Describe(m().NextObservations()), "1:ready ");
}

TEST_F(ManagerTest, NodeWithoutGenerationManagementAdmitsNoCreateWhileTheProviderProbeFails) {
  Make(false);
  specs_[1] = {"busybox"};
  m().OnGenerationReports({Ready(1, kA)}, Diagnostic::kDaemonUnreachable);
  EXPECT_TRUE(preparer_.attempts.empty());
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kUnconfirmed);
  m().OnGenerationReports({Ready(1, kA)});
  EXPECT_EQ(m().Admit(Request(1, wire::Operation::kCreate)), GateAnswer::kRun);
}

}  // namespace
}  // namespace sn::agent

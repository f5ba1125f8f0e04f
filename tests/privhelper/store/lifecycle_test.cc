// A generation's lifecycle table (privhelper/store/lifecycle.h): every change of phase goes
// through Lifecycle::MoveTo, which refuses a transition the table does not list and leaves the
// phase as it was.
#include "privhelper/store/lifecycle.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sn::privhelper::store {
namespace {

const std::vector<Phase> kAllPhases = {
    Phase::kAbsent,      Phase::kPreparing,   Phase::kReadyAwaitingProbe, Phase::kReady,
    Phase::kNeedsRepair, Phase::kRepairBegun, Phase::kRepairFinishing,    Phase::kCollecting,
    Phase::kDropped,     Phase::kFailed};

// A lifecycle in `p`, reached through listed transitions only (a shortest path from kAbsent).
Lifecycle At(Phase p) {
  std::vector<std::pair<Phase, std::vector<Phase>>> frontier = {{Phase::kAbsent, {}}};
  std::set<Phase> seen = {Phase::kAbsent};
  for (size_t i = 0; i < frontier.size(); ++i) {
    auto [at, path] = frontier[i];
    if (at == p) {
      Lifecycle l;
      for (Phase step : path) EXPECT_TRUE(l.MoveTo(step).ok());
      return l;
    }
    for (int t = 0; t < kTransitionCount; ++t) {
      if (kTransitions[t].from != at || seen.count(kTransitions[t].to) > 0) continue;
      seen.insert(kTransitions[t].to);
      std::vector<Phase> next = path;
      next.push_back(kTransitions[t].to);
      frontier.push_back({kTransitions[t].to, next});
    }
  }
  ADD_FAILURE() << "phase " << PhaseName(p) << " is unreachable";
  return Lifecycle();
}

TEST(LifecycleTest, IllegalTransitionIsRefusedAndLeavesThePhase) {
  // A dropped generation is never used again; a failed one is kept as found; a generation is
  // never READY without a Finish or a start that adopted it.
  const std::vector<std::pair<Phase, Phase>> illegal = {
      {Phase::kDropped, Phase::kReady},        {Phase::kDropped, Phase::kPreparing},
      {Phase::kFailed, Phase::kCollecting},    {Phase::kFailed, Phase::kReady},
      {Phase::kAbsent, Phase::kReady},         {Phase::kNeedsRepair, Phase::kReady},
      {Phase::kPreparing, Phase::kDropped},    {Phase::kCollecting, Phase::kFailed},
      {Phase::kReady, Phase::kReadyAwaitingProbe}};
  for (const auto& [from, to] : illegal) {
    SCOPED_TRACE(std::string(PhaseName(from)) + " -> " + std::string(PhaseName(to)));
    ASSERT_EQ(FindTransition(from, to), nullptr);
    Lifecycle l = At(from);
    ASSERT_EQ(l.phase(), from);
    absl::Status s = l.MoveTo(to);
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_NE(s.message().find(std::string(PhaseName(to))), absl::string_view::npos) << s;
    EXPECT_EQ(l.phase(), from);
  }
}

TEST(LifecycleTest, EveryListedTransitionMovesAndNoOtherDoes) {
  for (Phase from : kAllPhases) {
    for (Phase to : kAllPhases) {
      Lifecycle l = At(from);
      const bool listed = FindTransition(from, to) != nullptr;
      EXPECT_EQ(l.MoveTo(to).ok(), listed) << PhaseName(from) << " -> " << PhaseName(to);
      EXPECT_EQ(l.phase(), listed ? to : from);
    }
  }
}

TEST(LifecycleTest, TableNamesEachStepAndItsDurableEffect) {
  for (int t = 0; t < kTransitionCount; ++t) {
    EXPECT_FALSE(kTransitions[t].step.empty()) << t;
    EXPECT_FALSE(kTransitions[t].durable.empty()) << t;
    EXPECT_NE(kTransitions[t].to, Phase::kAbsent) << t;  // an entry is never forgotten
  }
}

TEST(LifecycleTest, DroppedAndFailedAreFinal) {
  for (int t = 0; t < kTransitionCount; ++t) {
    EXPECT_NE(kTransitions[t].from, Phase::kDropped) << kTransitions[t].step;
    EXPECT_NE(kTransitions[t].from, Phase::kFailed) << kTransitions[t].step;
  }
}

TEST(LifecycleTest, ReportedStatesAndHeld) {
  std::set<std::string> names;
  for (Phase p : kAllPhases) names.insert(std::string(PhaseName(p)));
  EXPECT_EQ(names.size(), kAllPhases.size());
  EXPECT_EQ(ReportedState(Phase::kReadyAwaitingProbe), GenerationState::kReady);
  EXPECT_EQ(ReportedState(Phase::kRepairBegun), GenerationState::kNeedsRepair);
  EXPECT_EQ(ReportedState(Phase::kRepairFinishing), GenerationState::kNeedsRepair);
  EXPECT_EQ(ReportedState(Phase::kCollecting), GenerationState::kCollecting);
  std::set<Phase> held;
  for (Phase p : kAllPhases) {
    if (IsHeld(p)) held.insert(p);
  }
  EXPECT_EQ(held, (std::set<Phase>{Phase::kReadyAwaitingProbe, Phase::kReady,
                                   Phase::kNeedsRepair, Phase::kRepairBegun,
                                   Phase::kRepairFinishing}));
}

}  // namespace
}  // namespace sn::privhelper::store

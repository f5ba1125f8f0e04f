// Observation rotation (spec §3): at most 8 per message, target and serving first, every other
// generation within ⌈n/6⌉ messages.
#include "agent/generations/observations.h"

#include <map>
#include <set>
#include <string>

#include "common/wire/limits.h"
#include "gtest/gtest.h"

namespace sn::agent {
namespace {

wire::Observation Obs(int64_t g) {
  wire::Observation o;
  o.generation = g;
  o.specification_digest = std::string(64, 'a');
  o.state = wire::GenerationState::kReady;
  return o;
}

// n held generations 1..n; the target is n and the serving generation n-1 (when n > 1).
TEST(ObservationRotorTest, EveryHeldGenerationIsReportedWithinCeilNOverSixMessages) {
  for (int64_t n = 1; n <= 100; ++n) {
    ObservationRotor rotor;
    std::map<int64_t, int> first_seen;  // generation -> message index (1-based)
    const int64_t bound = (n + 5) / 6;
    for (int64_t message = 1; message <= bound; ++message) {
      std::vector<wire::Observation> leading = {Obs(n)};
      if (n > 1) leading.push_back(Obs(n - 1));
      std::vector<wire::Observation> others;
      for (int64_t g = n - 2; g >= 1; --g) others.push_back(Obs(g));  // any order
      std::vector<wire::Observation> out = rotor.Next(leading, others);
      ASSERT_LE(out.size(), wire::kMaxGenerationObservations);
      ASSERT_GE(out.size(), leading.size());
      EXPECT_EQ(out[0].generation, n) << "the target comes first";
      if (n > 1) {
        EXPECT_EQ(out[1].generation, n - 1) << "then the serving generation";
      }
      std::set<int64_t> in_message;
      for (const wire::Observation& o : out) {
        EXPECT_TRUE(in_message.insert(o.generation).second) << "duplicate " << o.generation;
        first_seen.emplace(o.generation, message);
      }
    }
    EXPECT_EQ(first_seen.size(), static_cast<size_t>(n))
        << "n=" << n << ": not every generation within " << bound << " messages";
  }
}

TEST(ObservationRotorTest, RotationIsFairOverManyMessages) {
  ObservationRotor rotor;
  std::vector<wire::Observation> others;
  for (int64_t g = 1; g <= 20; ++g) others.push_back(Obs(g));
  std::map<int64_t, int> count;
  for (int i = 0; i < 60; ++i) {
    for (const wire::Observation& o : rotor.Next({Obs(100), Obs(99)}, others)) {
      ++count[o.generation];
    }
  }
  EXPECT_EQ(count[100], 60);
  EXPECT_EQ(count[99], 60);
  // 60 messages x 6 slots over 20 generations: 18 each, exactly.
  for (int64_t g = 1; g <= 20; ++g) EXPECT_EQ(count[g], 18) << g;
}

TEST(ObservationRotorTest, ANewGenerationDoesNotDelayTheOthersBeyondOneMoreTurn) {
  ObservationRotor rotor;
  std::vector<wire::Observation> others;
  for (int64_t g = 1; g <= 12; ++g) others.push_back(Obs(g));
  std::vector<wire::Observation> first = rotor.Next({Obs(50)}, others);  // 1..7
  EXPECT_EQ(first.back().generation, 7);
  others.push_back(Obs(30));  // a newly held generation
  std::vector<wire::Observation> second = rotor.Next({Obs(50)}, others);
  // Continues after 7: 8..12, 30, then wraps to 1.
  std::vector<int64_t> got;
  for (size_t i = 1; i < second.size(); ++i) got.push_back(second[i].generation);
  EXPECT_EQ(got, (std::vector<int64_t>{8, 9, 10, 11, 12, 30, 1}));
}

TEST(ObservationRotorTest, WithoutLeadingEntriesEightOthersFit) {
  ObservationRotor rotor;
  std::vector<wire::Observation> others;
  for (int64_t g = 1; g <= 10; ++g) others.push_back(Obs(g));
  EXPECT_EQ(rotor.Next({}, others).size(), 8u);
  EXPECT_EQ(rotor.Next({}, {}).size(), 0u);
}

}  // namespace
}  // namespace sn::agent

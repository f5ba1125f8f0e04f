// bazel run -c opt //tests/sim:explore -- --seed=S [--steps=N] [--seeds=K]
// [--budget_steps=B]
//     [--bug=NAME] [--trace] [--invariants]
// Runs the seeded simulation (world.h) for seed S (then S+1, ... for K seeds,
// or until B steps in all were run). Exit 0 when every invariant held; on a
// violation prints the seed, the step and the invariant, replays the run up to
// that step to confirm the shortest failing step count, prints the command that
// replays it, and exits 1. Usage errors exit 2.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "tests/sim/world.h"

namespace {

bool Flag(std::string_view arg, std::string_view name, std::string_view* value) {
  const std::string prefix = "--" + std::string(name) + "=";
  if (arg.substr(0, prefix.size()) != prefix) return false;
  *value = arg.substr(prefix.size());
  return true;
}

bool ParseU64(std::string_view text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(absl::string_view(text.data(), text.size()), out);
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "explore: %s\nusage: explore --seed=S [--steps=N (100000)] [--seeds=K "
               "(1)] "
               "[--budget_steps=B] [--bug=none|skip_record_recovery|"
               "retention_not_told_of_disconnect|volatile_owner_epoch] [--trace] "
               "[--invariants]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress per seed, also into a file
  uint64_t seed = 0, steps = 100000, seeds = 1, budget = 0;
  bool have_seed = false, trace = false;
  sn::sim::Bug bug = sn::sim::Bug::kNone;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i], v;
    if (Flag(a, "seed", &v)) {
      if (!ParseU64(v, &seed)) return Usage("--seed takes an unsigned 64-bit decimal");
      have_seed = true;
    } else if (Flag(a, "steps", &v)) {
      if (!ParseU64(v, &steps) || steps == 0) return Usage("--steps takes a positive decimal");
    } else if (Flag(a, "seeds", &v)) {
      if (!ParseU64(v, &seeds) || seeds == 0) return Usage("--seeds takes a positive decimal");
    } else if (Flag(a, "budget_steps", &v)) {
      if (!ParseU64(v, &budget) || budget == 0) {
        return Usage("--budget_steps takes a positive decimal");
      }
    } else if (Flag(a, "bug", &v)) {
      if (!sn::sim::ParseBug(v, &bug)) return Usage("unknown --bug");
    } else if (a == "--trace") {
      trace = true;
    } else if (a == "--invariants") {
      for (const auto& inv : sn::sim::Invariants()) {
        std::printf("%-30s %s\n", inv.name, inv.requirement);
      }
      return 0;
    } else {
      return Usage("unknown argument");
    }
  }
  if (!have_seed) return Usage("--seed is required");
  if (budget > 0) seeds = UINT64_MAX;

  uint64_t total = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t k = 0; k < seeds; ++k) {
    const uint64_t s = seed + k;
    uint64_t n = steps;
    if (budget > 0) {
      if (total >= budget) break;
      n = std::min(steps, budget - total);
    }
    sn::sim::Options o;
    o.seed = s;
    o.steps = n;
    o.bug = bug;
    o.trace = trace;
    sn::sim::RunResult r = sn::sim::Run(o);
    total += r.steps_run;
    if (!r.ok) {
      std::printf("seed=%" PRIu64 " step=%" PRIu64 " invariant=%s: %s\n", s, r.steps_run,
                  r.invariant.c_str(), r.detail.c_str());
      std::printf("fault rates: %s\n", r.fault_rates.c_str());
      // The run stops at its first violation, so no shorter run of this seed
      // can fail: replay exactly that many steps to confirm it.
      o.steps = r.steps_run;
      o.trace = false;
      sn::sim::RunResult again = sn::sim::Run(o);
      const bool same = !again.ok && again.steps_run == r.steps_run &&
                        again.invariant == r.invariant && again.trace_hash == r.trace_hash;
      std::printf("shortest failing run: --steps=%" PRIu64 " (replay %s)\n", r.steps_run,
                  same ? "fails identically" : "DIFFERS: the run is not deterministic");
      std::printf("replay: bazel run -c opt //tests/sim:explore -- --seed=%" PRIu64
                  " --steps=%" PRIu64 "%s%s\n",
                  s, r.steps_run, bug == sn::sim::Bug::kNone ? "" : " --bug=",
                  bug == sn::sim::Bug::kNone ? "" : std::string(sn::sim::BugName(bug)).c_str());
      std::fflush(stdout);
      return 1;
    }
    if (seeds > 1 || budget > 0) {
      std::printf("seed=%" PRIu64 " steps=%" PRIu64 " ok hash=%016" PRIx64 "\n", s, r.steps_run,
                  r.trace_hash);
    } else {
      std::printf("seed=%" PRIu64 " steps=%" PRIu64 " ok hash=%016" PRIx64 "\n", s, r.steps_run,
                  r.trace_hash);
      std::printf("fault rates: %s\n", r.fault_rates.c_str());
      for (const auto& [name, value] : r.counters) {
        std::printf("  %-28s %" PRIu64 "\n", name.c_str(), value);
      }
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("all invariants held: %" PRIu64 " steps in %.1f s (%.0f steps/s)\n", total, secs,
              secs > 0 ? static_cast<double>(total) / secs : 0.0);
  return 0;
}

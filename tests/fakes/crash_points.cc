#include "tests/fakes/crash_points.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace sn::fs {
namespace {

using UnsyncedData = FaultFs::UnsyncedData;

const char* DataName(UnsyncedData d) {
  switch (d) {
    case UnsyncedData::kLost: return "lost";
    case UnsyncedData::kTorn: return "torn";
    case UnsyncedData::kKept: return "kept";
  }
  return "?";
}

// Every power-loss outcome FaultFs models for `image`.
std::vector<FaultFs::CrashOptions> PowerLossVariants(const FaultFs::Image& image) {
  bool unsynced = false;
  for (const auto& [ino, n] : image.nodes) {
    if (n.type == FileType::kRegular && n.data != n.durable_data) unsynced = true;
  }
  std::vector<UnsyncedData> data = {UnsyncedData::kLost};
  if (unsynced) {
    data.push_back(UnsyncedData::kTorn);
    data.push_back(UnsyncedData::kKept);
  }
  std::vector<FaultFs::CrashOptions> out;
  for (size_t m = 0; m <= image.pending.size(); ++m) {
    for (UnsyncedData d : data) out.push_back({m, d});
  }
  return out;
}

std::string Describe(const FaultFs::CrashOptions& o, size_t pending) {
  return absl::StrCat("power loss (", o.persisted_metadata_ops, " of ", pending,
                      " pending directory operations persisted, unsynced data ",
                      DataName(o.data), ")");
}

// "12 unlink dir/.name.tmp.123": removing a temporary is best-effort cleanup (durable.h: a
// start removes what is left), so its failure may go unreported.
bool IsTemporaryCleanup(const std::string& step_line) {
  const size_t kind = step_line.find(' ');
  if (kind == std::string::npos || step_line.compare(kind + 1, 7, "unlink ") != 0) return false;
  const std::string path = step_line.substr(kind + 8);
  const std::string name = path.substr(path.rfind('/') + 1);
  return name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos;
}

std::string ResultText(const absl::StatusOr<std::string>& r) {
  return r.ok() ? absl::StrCat("OK \"", *r, "\"") : r.status().ToString();
}

// Runs the operation on `fs`, arming the injection (`arm(fs)`) when its start is over: at the
// `started` call, or before its first step when `calls_started` is false.
absl::StatusOr<std::string> RunOperation(const CrashCase& c, FaultFs& fs, bool calls_started,
                                         const std::function<void(FaultFs&)>& arm) {
  bool armed = false;
  std::function<void()> started = [&] {
    if (!armed) {
      armed = true;
      arm(fs);
    }
  };
  if (!calls_started) started();
  return c.operation(fs, started);
}

FaultFs::Image InitialImage(const CrashCase& c) {
  FaultFs fs(c.fs_options);
  if (c.setup) c.setup(fs);
  // Whatever the setup left is the durable starting point.
  fs.Crash({fs.PendingDirOps(), UnsyncedData::kKept});
  return fs.Snapshot();
}

class Runner {
 public:
  Runner(const CrashCase& c, const PointOptions& options)
      : c_(c), options_(options), initial_(InitialImage(c)) {
    report_.name = c.name;
    clean_ = RunClean(c);
    report_.start_steps = clean_.start_steps;
    report_.steps = static_cast<int64_t>(clean_.step_log.size()) - clean_.start_steps;
  }

  // One run from the initial state with `arm` applied once the start is over (`arm` gets the
  // steps the start took: step k of the operation is step start + k of the process), then
  // every restart of what it left.
  void Run(const std::function<void(FaultFs&, int64_t start)>& arm, RunEnd::Event event,
           int64_t step, const std::string& what, bool require_error) {
    ++report_.points;
    FaultFs fs(c_.fs_options, initial_);
    int64_t start = 0;
    RunEnd end;
    end.event = event;
    end.step = step;
    end.result = RunOperation(c_, fs, clean_.calls_started, [&](FaultFs& f) {
      start = f.steps();
      arm(f, start);
    });
    const std::vector<std::string> log = fs.step_log();
    const bool hit = event == RunEnd::Event::kCrashed ? fs.crashed() : fs.faults_injected() > 0;
    std::string base = what;
    if (step > 0 && start + step <= static_cast<int64_t>(log.size())) {
      base = absl::StrCat(what, " (", log[start + step - 1], ")");
    }
    base = absl::StrCat(base, ", the operation returned ", ResultText(end.result));
    if (hit) ++report_.triggered;
    if (event == RunEnd::Event::kCrashed && step > 0 && !hit) {
      Violation(base, "the crash step was never reached: the operation is not deterministic",
                log, fs.Dump());
    }
    const bool cleanup = step > 0 && start + step <= static_cast<int64_t>(log.size()) &&
                         IsTemporaryCleanup(log[start + step - 1]);
    if (event == RunEnd::Event::kFailed && hit && require_error && end.result.ok() && !cleanup) {
      Violation(base, "a step failed but the operation reported success", log, fs.Dump());
    }
    RestartAll(fs.Snapshot(), end, base, log);
  }

  PointReport Take() { return std::move(report_); }
  void set_sample(int64_t sample) { report_.sample = sample; }
  int64_t steps() const { return report_.steps; }
  const CleanRun& clean() const { return clean_; }
  const FaultFs::Image& initial() const { return initial_; }

 private:
  void Violation(const std::string& where, const std::string& what,
                 const std::vector<std::string>& log, const std::string& tree) {
    report_.violations.push_back(absl::StrCat(c_.name, ": ", where, ": ", what,
                                              "\n  steps of the run:\n    ",
                                              absl::StrJoin(log, "\n    "),
                                              "\n  tree before the restart:\n", tree));
  }

  void RestartAll(const FaultFs::Image& image, const RunEnd& end, const std::string& base,
                  const std::vector<std::string>& log) {
    struct Variant {
      std::string name;
      std::optional<FaultFs::CrashOptions> crash;  // nullopt: kill -9
    };
    std::vector<Variant> variants;
    variants.push_back({"kill -9", std::nullopt});
    for (const FaultFs::CrashOptions& o : PowerLossVariants(image)) {
      variants.push_back({Describe(o, image.pending.size()), o});
    }
    for (const Variant& v : variants) {
      FaultFs fs(c_.fs_options, image);
      if (v.crash) fs.Crash(*v.crash);
      RunEnd e = end;
      e.description = absl::StrCat(base, "; then ", v.name);
      const std::string tree = fs.Dump();
      absl::StatusOr<std::string> seen = c_.restart(fs, e);
      ++report_.restarts;
      if (!seen.ok()) {
        Violation(e.description, seen.status().ToString(), log, tree);
        continue;
      }
      ++report_.adopted[*seen];
      const bool second = options_.second_power_loss == SecondPowerLoss::kAlways ||
                          (options_.second_power_loss == SecondPowerLoss::kAfterPowerLoss &&
                           v.crash.has_value());
      if (!second) continue;
      const FaultFs::Image after = fs.Snapshot();
      for (const FaultFs::CrashOptions& o : PowerLossVariants(after)) {
        FaultFs fs2(c_.fs_options, after);
        fs2.Crash(o);
        RunEnd e2 = e;
        e2.second_restart = true;
        e2.description = absl::StrCat(e.description, ", a restart that adopted \"", *seen,
                                      "\", then ", Describe(o, after.pending.size()));
        const std::string tree2 = fs2.Dump();
        absl::StatusOr<std::string> again = c_.restart(fs2, e2);
        ++report_.restarts;
        if (!again.ok()) {
          Violation(e2.description, again.status().ToString(), log, tree2);
        } else if (!seen->empty() && *again != *seen) {
          Violation(e2.description,
                    absl::StrCat("what the first restart adopted was not durable: the second "
                                 "restart adopted \"", *again, "\""),
                    log, tree2);
        }
      }
    }
  }

  const CrashCase& c_;
  const PointOptions options_;
  const FaultFs::Image initial_;
  CleanRun clean_;
  PointReport report_;
};

}  // namespace

int64_t FaultSampleFromEnvironment() {
  const char* v = std::getenv("SN_FAULT_POINT_SAMPLE");
  int64_t n = 1;
  if (v == nullptr || !absl::SimpleAtoi(v, &n) || n < 1) return 1;
  return n;
}

std::string PointReport::Summary() const {
  return absl::StrCat("start_steps=", start_steps, " steps=", steps, " points=", points,
                      sample > 1 ? absl::StrCat(" (1 in ", sample, ")") : "",
                      " triggered=", triggered,
                      " restarts=", restarts, " violations=", violations.size());
}

CleanRun RunClean(const CrashCase& c) {
  FaultFs fs(c.fs_options, InitialImage(c));
  CleanRun out;
  uint64_t bytes_at_start = 0;
  bool called = false;
  out.result = c.operation(fs, [&] {
    if (called) return;
    called = true;
    out.calls_started = true;
    out.start_steps = fs.steps();
    bytes_at_start = fs.bytes_appended();
  });
  out.step_log = fs.step_log();
  out.bytes_written = fs.bytes_appended() - bytes_at_start;
  return out;
}

PointReport RunCrashPoints(const CrashCase& c, const PointOptions& options) {
  Runner r(c, options);
  const int64_t n = r.steps();
  for (int64_t k = 1; k <= n; ++k) {
    r.Run([k](FaultFs& fs, int64_t start) { fs.CrashAtStep(start + k); },
          RunEnd::Event::kCrashed, k, absl::StrCat("crash at step ", k, " of ", n), false);
  }
  r.Run([](FaultFs&, int64_t) {}, RunEnd::Event::kCompleted, 0,
        absl::StrCat("crash after all ", n, " steps"), false);
  return r.Take();
}

PointReport RunFaultPoints(const CrashCase& c, const absl::Status& fault,
                           const PointOptions& options) {
  Runner r(c, options);
  const int64_t n = r.steps();
  const int64_t sample = std::max<int64_t>(1, options.fault_sample);
  r.set_sample(sample);
  for (int64_t k = 1; k <= n; ++k) {
    if ((k - 1) % sample != 0 && k != n) continue;
    r.Run([k, &fault](FaultFs& fs, int64_t start) { fs.FailStep(start + k, fault); },
          RunEnd::Event::kFailed, k,
          absl::StrCat("step ", k, " of ", n, " failed with ", fault.ToString()), true);
  }
  return r.Take();
}

PointReport RunFailedSyncs(const CrashCase& c, const absl::Status& fault,
                           const PointOptions& options) {
  Runner r(c, options);
  r.Run([&fault](FaultFs& fs, int64_t) { fs.FailSyncs(fault); }, RunEnd::Event::kFailed, 0,
        absl::StrCat("every fsync failed with ", fault.ToString()), true);
  return r.Take();
}

PointReport RunByteBudgets(const CrashCase& c, const PointOptions& options) {
  Runner r(c, options);
  const uint64_t written = r.clean().bytes_written;
  const int64_t sample = std::max<int64_t>(1, options.fault_sample);
  r.set_sample(sample);
  const uint64_t points =
      static_cast<uint64_t>(std::max<int64_t>(1, options.max_budget_points / sample));
  // Every byte when fewer are written than points allowed (sampled: every sample-th).
  const uint64_t stride =
      std::max<uint64_t>(static_cast<uint64_t>(sample), (written + points - 1) / points);
  for (uint64_t b = 0; b < written; b += stride) {
    r.Run([b](FaultFs& fs, int64_t) { fs.SetByteBudget(fs.BytesUsed() + b); },
          RunEnd::Event::kFailed, 0,
          absl::StrCat("the disk filled after ", b, " of the ", written, " bytes written"), true);
  }
  return r.Take();
}

void ExpectNoViolations(const PointReport& report, const std::string& kind) {
  std::cout << "CRASH-POINTS " << report.name << " " << kind << ": " << report.Summary()
            << std::endl;
  ::testing::Test::RecordProperty(absl::StrCat(kind, "_steps"), static_cast<int>(report.steps));
  ::testing::Test::RecordProperty(absl::StrCat(kind, "_points"), static_cast<int>(report.points));
  ::testing::Test::RecordProperty(absl::StrCat(kind, "_restarts"),
                                  static_cast<int>(report.restarts));
  EXPECT_GT(report.points, 0) << report.name << ": nothing was injected";
  EXPECT_TRUE(report.violations.empty())
      << report.violations.size() << " violation(s) in " << report.name << " (" << kind
      << "); the first:\n"
      << absl::StrJoin(report.violations.begin(),
                       report.violations.begin() +
                           static_cast<std::ptrdiff_t>(std::min<size_t>(3, report.violations.size())),
                       "\n\n");
}

}  // namespace sn::fs

// Wire codec throughput and memory (bazel run -c opt //tests/bench:wire_bench).
//
// For a heartbeat, a 1 MiB and a 64 MiB-base64 write_file request: the strict Decode
// (validation and base64 decoding included) beside a plain nlohmann::json::parse of the same
// bytes (which validates nothing of the contract), then the ratio strict/plain of their times.
// The strict Decode alone of a create and an exec request (BM_StrictDecode/3, /4), and of three
// responses with the check of their result as Core makes it (BM_ResponseDecode: Decode, then
// DecodeResult for the pending operation), time the other decoders for comparisons between
// builds; they have no plain side and no suite row.
// Finally the peak RSS of a child process that reads one 72 MiB frame and decodes it.
// With --suite-json=FILE it also writes those ratios as the suite's rows (tests/bench/suite.py);
// --quick runs each benchmark 3 times for at least 0.1 s and takes the median (instead of the
// library's default of one run of at least 0.5 s).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/wire/codec.h"
#include "nlohmann/json.hpp"

namespace {

using namespace sn::wire;  // NOLINT

constexpr char kU1[] = "0f8fad5b-d9cb-469f-a165-70867728950e";
constexpr char kU2[] = "7c9e6679-7425-40de-944b-e07fc1f90ae7";

std::string HeartbeatFrame() {
  Heartbeat hb;
  hb.connection_id = kU1;
  hb.owner_epoch = 7;
  hb.health.provider_ready = true;
  hb.health.observed_at = "2026-11-29T12:00:00Z";
  hb.health.host.load_1m = "0.25";
  hb.health.host.cpu_cores = 8;
  hb.health.host.memory_total_bytes = int64_t{1} << 34;
  for (int i = 0; i < 4; ++i) hb.health.active_operations.push_back({kU2, "exec", ActiveState::kRunning});
  return Encode(hb);
}

// A write_file request whose base64 content is `base64_bytes` long.
std::string WriteFileFrame(size_t base64_bytes) {
  Request r;
  r.id = kU1;
  r.connection_id = kU2;
  r.owner_epoch = 1;
  r.sequence = 1;
  r.generation = 1;
  r.operation = Operation::kWriteFile;
  r.operation_name = "write_file";
  r.timeout_ms = 1000;
  std::string content(base64_bytes / 4 * 3, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 131 + (i >> 9));
  r.args = WriteFileArgs{kU2, "/data/file.bin", std::move(content), 0644};
  return Encode(r);
}

Request BaseRequest(Operation op, Arguments args) {
  Request r;
  r.id = kU1;
  r.connection_id = kU2;
  r.owner_epoch = 1;
  r.sequence = 1;
  r.generation = 1;
  r.operation = op;
  r.operation_name = std::string(OperationName(op));
  r.timeout_ms = 1000;
  r.args = std::move(args);
  return r;
}

// A create request with every member (command and env included).
std::string CreateFrame() {
  CreateArgs a;
  a.sandbox_id = kU2;
  a.image = "python:3.12-slim";
  a.command = std::vector<std::string>{"sleep", "infinity"};
  a.env = std::vector<std::pair<std::string, std::string>>{{"PATH", "/usr/bin:/bin"},
                                                           {"LANG", "C.UTF-8"}};
  a.cpu_millis = 1000;
  a.memory_bytes = int64_t{512} << 20;
  return Encode(BaseRequest(Operation::kCreate, std::move(a)));
}

// An exec request with every member (a short stdin).
std::string ExecFrame() {
  ExecArgs a;
  a.sandbox_id = kU2;
  a.argv = {"/bin/sh", "-c", "cat; echo done"};
  a.stdin_bytes = "hello, sandbox\n";
  a.output_limit_bytes = int64_t{1} << 20;
  return Encode(BaseRequest(Operation::kExec, std::move(a)));
}

const std::string& Frame(int which) {
  static const std::string* frames[5] = {
      new std::string(HeartbeatFrame()), new std::string(WriteFileFrame(size_t{1} << 20)),
      new std::string(WriteFileFrame(size_t{64} << 20)), new std::string(CreateFrame()),
      new std::string(ExecFrame())};
  return *frames[which];
}

const char* kNames[] = {"heartbeat", "write_file_1MiB", "write_file_64MiB_base64",
                        "create_request", "exec_request"};

// The responses of BM_ResponseDecode, each with the operation Core decodes its result for.
struct ResponseCase {
  const char* name;
  Operation op;
  std::string frame;
};

Response BaseResponse() {
  Response r;
  r.id = kU1;
  r.connection_id = kU2;
  return r;
}

const ResponseCase& ResponseFrame(int which) {
  static const ResponseCase* cases[3] = {
      // exec: 1 KiB of stdout, a line of stderr.
      new ResponseCase{"exec_response", Operation::kExec, [] {
                         Response r = BaseResponse();
                         std::string out(1024, 'x');
                         r.result = Result(ExecResult{0, std::move(out), "warning\n", false});
                         return Encode(r);
                       }()},
      // observe of a completed create: the recorded response and its create result nested.
      new ResponseCase{"observe_response", Operation::kObserve, [] {
                         Response r = BaseResponse();
                         RecordedResponse rec;
                         rec.id = kU1;
                         rec.result = MutationResult(CreateResult{kU2, "native-0123456789abcdef"});
                         r.result = Result(ObserveResult{kU1, "create", ObserveState::kCompleted,
                                                         std::move(rec)});
                         return Encode(r);
                       }()},
      // a failed create that settled: error_code with info.create_settled.
      new ResponseCase{"failed_create_response", Operation::kCreate, [] {
                         Response r = BaseResponse();
                         r.error_code = "failed";
                         r.create_settled = CreateSettled{kU1, kU2, "native-0123456789abcdef", 3,
                                                          std::string(64, 'a')};
                         return Encode(r);
                       }()}};
  return *cases[which];
}

void BM_StrictDecode(benchmark::State& state) {
  const std::string& f = Frame(static_cast<int>(state.range(0)));
  const Role role = state.range(0) == 0 ? Role::kCore : Role::kNode;
  for (auto _ : state) {
    absl::StatusOr<sn::wire::Frame> d = Decode(f, role);
    if (!d.ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(d);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.size()));
  state.SetLabel(kNames[state.range(0)]);
}

void BM_NlohmannParse(benchmark::State& state) {
  const std::string& f = Frame(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(j);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.size()));
  state.SetLabel(kNames[state.range(0)]);
}

void BM_ResponseDecode(benchmark::State& state) {
  const ResponseCase& c = ResponseFrame(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    absl::StatusOr<sn::wire::Frame> d = Decode(c.frame, Role::kCore);
    if (!d.ok()) {
      state.SkipWithError("decode failed");
      break;
    }
    const Response& resp = std::get<Response>(*d);
    if (resp.raw_result) {
      absl::StatusOr<Result> res = DecodeResult(c.op, *resp.raw_result);
      if (!res.ok()) state.SkipWithError("result decode failed");
      benchmark::DoNotOptimize(res);
    }
    benchmark::DoNotOptimize(d);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * c.frame.size()));
  state.SetLabel(c.name);
}

BENCHMARK(BM_StrictDecode)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ResponseDecode)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NlohmannParse)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

// Collects per-run CPU times to print strict/plain ratios after the table: both are one thread
// decoding in memory, and on a loaded machine the wall time also counts waiting for a CPU.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      if (r.run_type == Run::RT_Iteration) {
        times_[r.benchmark_name()] = r.GetAdjustedCPUTime();
      } else if (r.aggregate_name == "median") {  // with --benchmark_repetitions
        times_[r.run_name.str()] = r.GetAdjustedCPUTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  // Adjusted real time (us) of a run by name, if it ran.
  std::optional<double> Time(const std::string& name) const {
    auto it = times_.find(name);
    if (it == times_.end()) return std::nullopt;
    return it->second;
  }
  void PrintRatios() const {
    std::printf("\nstrict decode CPU time / plain nlohmann parse CPU time (<= 1.0 meets the target):\n");
    for (int i = 0; i < 3; ++i) {
      const std::string arg = "/" + std::to_string(i);
      auto s = times_.find("BM_StrictDecode" + arg);
      auto n = times_.find("BM_NlohmannParse" + arg);
      if (s == times_.end() || n == times_.end()) continue;
      std::printf("  %-26s %6.3f  (strict %.1f us, plain %.1f us)\n", kNames[i],
                  s->second / n->second, s->second, n->second);
    }
  }

 private:
  std::map<std::string, double> times_;
};

struct PeakRss {
  double peak_mib = 0;
  double frame_mib = 0;
};

// Peak RSS of a fresh child that reads one kMaxFrameBytes frame from a file and decodes it
// (nullopt when the child could not measure).
std::optional<PeakRss> MeasurePeakRss() {
  std::string frame = WriteFileFrame(size_t{64} << 20);
  frame.append(kMaxFrameBytes - frame.size() - 1, ' ');  // whitespace up to exactly 72 MiB
  frame.push_back('\n');
  char path[] = "/tmp/wb-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return std::nullopt;
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(frame.data(), static_cast<std::streamsize>(frame.size()));
  }
  const size_t size = frame.size();
  std::string().swap(frame);
  int report[2];
  if (pipe(report) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    struct rusage before;
    getrusage(RUSAGE_SELF, &before);
    std::ifstream in(path, std::ios::binary);
    std::string bytes;
    bytes.resize(size);
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    absl::StatusOr<sn::wire::Frame> d = Decode(bytes, Role::kNode);
    struct rusage after;
    getrusage(RUSAGE_SELF, &after);
    const bool ok = d.ok() && !std::get<Request>(*d).request_error;
    std::printf("\npeak RSS decoding one %zu-byte frame: %.1f MiB (%.2fx the frame; child "
                "baseline before reading %.1f MiB; decode %s)\n",
                size, after.ru_maxrss / 1024.0, after.ru_maxrss * 1024.0 / static_cast<double>(size),
                before.ru_maxrss / 1024.0, ok ? "ok" : "FAILED");
    std::fflush(stdout);
    const long peak_kib = after.ru_maxrss;
    const bool sent = write(report[1], &peak_kib, sizeof peak_kib) == sizeof peak_kib;
    _exit(ok && sent ? 0 : 1);
  }
  close(report[1]);
  long peak_kib = 0;
  const bool got = pid > 0 && read(report[0], &peak_kib, sizeof peak_kib) == sizeof peak_kib;
  close(report[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  unlink(path);
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return PeakRss{peak_kib / 1024.0, static_cast<double>(size) / (1024.0 * 1024.0)};
}

// -- the suite's rows (tests/bench/suite.py's contract) ------------------------------------
nlohmann::json Row(const std::string& metric, double value, const char* unit,
                   const std::string& baseline, double baseline_value, double bound) {
  const double ratio = value / baseline_value;
  char target[32];
  std::snprintf(target, sizeof target, "<= %.1fx", bound);
  return {{"bench", "wire_bench"}, {"metric", metric},   {"value", value},
          {"unit", unit},          {"baseline", baseline}, {"baseline_value", baseline_value},
          {"ratio", ratio},        {"target", target},   {"met", ratio <= bound}};
}

bool WriteSuiteRows(const std::string& path, const RatioReporter& reporter,
                    const std::optional<PeakRss>& rss) {
  nlohmann::json rows = nlohmann::json::array();
  for (int i = 0; i < 3; ++i) {
    const std::string arg = "/" + std::to_string(i);
    std::optional<double> s = reporter.Time("BM_StrictDecode" + arg);
    std::optional<double> n = reporter.Time("BM_NlohmannParse" + arg);
    if (!s || !n) return false;
    rows.push_back(Row(std::string("strict Decode CPU time, ") + kNames[i], *s, "us",
                       "plain nlohmann::json::parse", *n, 1.0));
  }
  if (!rss) return false;
  rows.push_back(Row("peak RSS decoding one 72 MiB frame", rss->peak_mib, "MiB", "the frame's size",
                     rss->frame_mib, 2.5));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << rows.dump(1) << "\n";
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The suite's flags (tests/bench/suite.py); the rest goes to the benchmark library.
  std::string suite_json;
  std::vector<char*> args;
  char quick_min_time[] = "--benchmark_min_time=0.1";
  char quick_repetitions[] = "--benchmark_repetitions=3";
  char quick_aggregates[] = "--benchmark_report_aggregates_only=true";
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--suite-json=", 13) == 0) {
      suite_json = argv[i] + 13;
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      args.push_back(quick_min_time);
      args.push_back(quick_repetitions);
      args.push_back(quick_aggregates);
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  // Forked before the large frames exist, so the child's peak is the decode's alone.
  const std::optional<PeakRss> rss = MeasurePeakRss();
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  if (!suite_json.empty() && !WriteSuiteRows(suite_json, reporter, rss)) {
    std::fprintf(stderr, "wire_bench: could not measure every row for %s\n", suite_json.c_str());
    return 1;
  }
  return 0;
}

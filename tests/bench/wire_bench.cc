// Wire codec throughput and memory (bazel run -c opt //tests/bench:wire_bench).
//
// For a heartbeat, a 1 MiB and a 64 MiB-base64 write_file request: the strict Decode
// (validation and base64 decoding included) beside a plain nlohmann::json::parse of the same
// bytes (which validates nothing of the contract), then the ratio strict/plain of their times.
// Finally the peak RSS of a child process that reads one 72 MiB frame and decodes it.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

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

const std::string& Frame(int which) {
  static const std::string* frames[3] = {
      new std::string(HeartbeatFrame()), new std::string(WriteFileFrame(size_t{1} << 20)),
      new std::string(WriteFileFrame(size_t{64} << 20))};
  return *frames[which];
}

const char* kNames[] = {"heartbeat", "write_file_1MiB", "write_file_64MiB_base64"};

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

BENCHMARK(BM_StrictDecode)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NlohmannParse)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

// Collects per-run times to print strict/plain ratios after the table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration && !r.error_occurred) {
        times_[r.benchmark_name()] = r.GetAdjustedRealTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void PrintRatios() const {
    std::printf("\nstrict decode time / plain nlohmann parse time (<= 1.0 meets the target):\n");
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

// Peak RSS of a fresh child that reads one kMaxFrameBytes frame from a file and decodes it.
void MeasurePeakRss() {
  std::string frame = WriteFileFrame(size_t{64} << 20);
  frame.append(kMaxFrameBytes - frame.size() - 1, ' ');  // whitespace up to exactly 72 MiB
  frame.push_back('\n');
  char path[] = "/tmp/wb-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return;
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(frame.data(), static_cast<std::streamsize>(frame.size()));
  }
  const size_t size = frame.size();
  std::string().swap(frame);
  const pid_t pid = fork();
  if (pid == 0) {
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
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  unlink(path);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Forked before the large frames exist, so the child's peak is the decode's alone.
  MeasurePeakRss();
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}

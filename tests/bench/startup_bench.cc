// privhelper's start-up check of its store (restart recovery, docs/protocol.md 16a): at every
// start, before its socket exists, privhelper opens its release and generation stores and
// verifies every READY generation's Runtime files byte for byte (GenerationStore::Recheck with
// verify_bytes; privhelper/main.cc). This bench prepares N generations of an M MiB image
// archive in a real store on disk (the real ReleaseStore and GenerationStore; the backend's
// image store is the store tests' fake, so the Docker lookups cost nothing here), then times,
// in the same run and interleaved round by round:
//   open    ReleaseStore::Open + GenerationStore::Open (the records);
//   check   Recheck(verify_bytes=true): what privhelper does before it serves;
//   read    the same files read once per generation that names them, 1 MiB read()s to
//           nowhere (what `cat FILE > /dev/null` does);
//   sha256  `sha256sum` of the same files, a subprocess, as many times.
// Each warm (page cache holding the files, as after a restart of privhelper alone) and cold
// (posix_fadvise DONTNEED on exactly these files before each step, as after a reboot).
// `--shared`: every generation names the same release (one file, hashed once per generation).
// Absolute times are noisy on a loaded machine; compare the ratios of one run
// (docs/performance.md, "privhelper's start-up check").
//   bazel run -c opt //tests/bench:startup_bench -- [--generations=3] [--mib=64] [--rounds=3]
//       [--shared]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/privhelper/store/store_fixture.h"

namespace sn::privhelper::store {
namespace {

struct Options {
  int generations = 3;
  int mib = 64;
  int rounds = 3;
  bool shared = false;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&a](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = value("--generations=")) {
      o.generations = std::atoi(v);
    } else if (const char* v = value("--mib=")) {
      o.mib = std::atoi(v);
    } else if (const char* v = value("--rounds=")) {
      o.rounds = std::atoi(v);
    } else if (a == "--shared") {
      o.shared = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.generations < 1 || o.mib < 1 || o.rounds < 1) {
    std::fprintf(stderr, "--generations, --mib and --rounds must be positive\n");
    std::exit(2);
  }
  return o;
}

double Seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

class Bench : public StoreTest {
 public:
  void TestBody() override {}

  int Run(const Options& o) {
    SetUp();
    std::vector<std::string> files;  // one per generation (the same one when shared)
    for (int g = 1; g <= o.generations; ++g) {
      const std::string source = o.shared ? "rel-1" : "rel-" + std::to_string(g);
      std::mt19937_64 rng(o.shared ? 42 : 42 + g);  // one release: the same bytes each time
      std::string bytes = kImageId;
      bytes.resize(static_cast<size_t>(o.mib) << 20);
      for (size_t i = kImageId.size(); i + 8 <= bytes.size(); i += 8) {
        const uint64_t r = rng();
        std::memcpy(&bytes[i], &r, 8);
      }
      if (absl::Status s = Prepare(g, {ArtifactBytes{"busybox.tar", "image", std::move(bytes)}},
                                   source);
          !s.ok()) {
        std::fprintf(stderr, "cannot prepare generation %d: %s\n", g, s.ToString().c_str());
        return 1;
      }
      files.push_back(state_path_ + "/releases/" + source + "/busybox.tar");
    }
    std::string sha_cmd = "sha256sum";
    for (const std::string& f : files) sha_cmd += " '" + f + "'";
    sha_cmd += " >/dev/null";

    auto drop = [&files] {
      for (const std::string& f : files) {
        const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
          posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
          close(fd);
        }
      }
    };
    auto read_all = [&files] {
      std::vector<char> buf(1 << 20);
      for (const std::string& f : files) {
        const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) std::abort();
        while (read(fd, buf.data(), buf.size()) > 0) {
        }
        close(fd);
      }
    };
    bool all_ready = true;
    auto check = [&] {
      generations_->Recheck(&importer_, /*verify_bytes=*/true);
      for (const GenerationStatus& s : generations_->Statuses()) {
        all_ready = all_ready && s.state == GenerationState::kReady;
      }
    };

    const double total_mib = static_cast<double>(o.mib) * o.generations;
    std::printf("privhelper start-up check: %d generation(s) of a %d MiB image archive%s, "
                "%.0f MiB verified per start, %d round(s)\n",
                o.generations, o.mib, o.shared ? " (one shared release)" : " (one release each)",
                total_mib, o.rounds);
    for (const bool cold : {false, true}) {
      std::vector<double> open_s, check_s, read_s, sha_s;
      for (int r = 0; r < o.rounds; ++r) {
        if (cold) drop();
        open_s.push_back(Seconds([&] { Reopen(); }));
        if (cold) drop();
        check_s.push_back(Seconds(check));
        if (cold) drop();
        read_s.push_back(Seconds(read_all));
        if (cold) drop();
        sha_s.push_back(Seconds([&] {
          if (std::system(sha_cmd.c_str()) != 0) std::abort();
        }));
      }
      const double c = Median(check_s), rd = Median(read_s), sh = Median(sha_s);
      std::printf("  %s cache (medians)\n", cold ? "cold" : "warm");
      std::printf("    open the stores        %8.2f ms\n", Median(open_s) * 1e3);
      std::printf("    start-up check         %8.1f ms  %7.0f MiB/s\n", c * 1e3, total_mib / c);
      std::printf("    read (cat >/dev/null)  %8.1f ms  %7.0f MiB/s   check/read    %.2fx\n",
                  rd * 1e3, total_mib / rd, c / rd);
      std::printf("    sha256sum              %8.1f ms  %7.0f MiB/s   check/sha256sum %.2fx\n",
                  sh * 1e3, total_mib / sh, c / sh);
    }
    if (!all_ready) {
      std::fprintf(stderr, "a generation was not READY after its check\n");
      return 1;
    }
    return 0;
  }
};

}  // namespace
}  // namespace sn::privhelper::store

int main(int argc, char** argv) {
  sn::privhelper::store::Bench bench;
  return bench.Run(sn::privhelper::store::Parse(argc, argv));
}

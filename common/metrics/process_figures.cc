#include "common/metrics/process_figures.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/absl_view.h"

namespace sn::metrics {
namespace {

// A /proc file (its size reads as 0, so it is read to its end), at most 4 KiB.
absl::StatusOr<std::string> ReadProcFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::UnavailableError("cannot open " + path);
  std::string out(4096, '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(got);
  return out;
}

}  // namespace

std::optional<uint64_t> ParseStatCpuTicks(std::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // After ") ": field 3 (state) is index 0, so utime (14) is index 11, stime (15) index 12.
  std::vector<absl::string_view> f =
      absl::StrSplit(AV(stat.substr(close + 1)), ' ', absl::SkipEmpty());
  uint64_t utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return std::nullopt;
  }
  return utime + stime;
}

absl::StatusOr<ProcessFigures> ReadProcessFigures(const std::string& dir) {
  ProcessFigures out;
  absl::StatusOr<std::string> statm = ReadProcFile(dir + "/statm");
  if (!statm.ok()) return statm.status();
  std::vector<absl::string_view> pages = absl::StrSplit(*statm, ' ', absl::SkipEmpty());
  int64_t resident = 0;
  if (pages.size() < 2 || !absl::SimpleAtoi(pages[1], &resident)) {
    return absl::DataLossError("unreadable statm");
  }
  out.resident_bytes = resident * sysconf(_SC_PAGESIZE);
  absl::StatusOr<std::string> stat = ReadProcFile(dir + "/stat");
  if (!stat.ok()) return stat.status();
  std::optional<uint64_t> ticks = ParseStatCpuTicks(*stat);
  if (!ticks.has_value()) return absl::DataLossError("unreadable stat");
  out.cpu_seconds = static_cast<double>(*ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
  DIR* d = opendir((dir + "/fd").c_str());
  if (d == nullptr) return absl::UnavailableError("cannot list fd/");
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++out.open_fds;
  }
  closedir(d);
  if (dir == "/proc/self") --out.open_fds;  // the listing's own descriptor
  return out;
}

}  // namespace sn::metrics

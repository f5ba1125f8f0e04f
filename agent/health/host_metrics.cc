#include "agent/health/host_metrics.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "common/wire/limits.h"

namespace sn::agent {
namespace {

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// /proc files report size 0 to fstat: read until EOF (bounded).
std::optional<std::string> ReadProcFile(const std::string& path, size_t max_bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  while (out.size() < max_bytes) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

int64_t SaturatingMul(uint64_t a, uint64_t b) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (a != 0 && b > kMax / a) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(a * b);
}

}  // namespace

std::optional<std::string> ParseLoadAverage(std::string_view loadavg) {
  std::string_view field = loadavg.substr(0, loadavg.find_first_of(" \t\n"));
  std::string_view integer = field.substr(0, field.find('.'));
  std::string_view fraction;
  if (integer.size() < field.size()) fraction = field.substr(integer.size() + 1);
  if (!AllDigits(integer)) return std::nullopt;
  if (integer.size() < field.size() && !AllDigits(fraction)) return std::nullopt;
  // Strip leading zeros of the integer part ("00.5" never appears, but be exact).
  while (integer.size() > 1 && integer[0] == '0') integer.remove_prefix(1);
  if (integer.size() > static_cast<size_t>(wire::kMaxLoadIntegerDigits)) {
    return std::string(wire::kMaxLoadIntegerDigits, '9');  // saturate
  }
  if (fraction.size() > static_cast<size_t>(wire::kMaxLoadFractionDigits)) {
    fraction = fraction.substr(0, wire::kMaxLoadFractionDigits);
  }
  std::string out(integer);
  if (!fraction.empty()) {
    out.push_back('.');
    out.append(fraction);
  }
  return out;
}

std::optional<MemInfo> ParseMemInfo(std::string_view meminfo) {
  std::optional<int64_t> total, available;
  for (absl::string_view line : absl::StrSplit(
           absl::string_view(meminfo.data(), meminfo.size()), '\n')) {
    absl::string_view rest = line;
    std::optional<int64_t>* target = nullptr;
    if (absl::ConsumePrefix(&rest, "MemTotal:")) {
      target = &total;
    } else if (absl::ConsumePrefix(&rest, "MemAvailable:")) {
      target = &available;
    } else {
      continue;
    }
    rest = absl::StripAsciiWhitespace(rest);
    if (!absl::ConsumeSuffix(&rest, "kB")) return std::nullopt;
    rest = absl::StripAsciiWhitespace(rest);
    uint64_t kb = 0;
    if (!absl::SimpleAtoi(rest, &kb)) return std::nullopt;
    *target = SaturatingMul(kb, 1024);
  }
  if (!total || !available) return std::nullopt;
  return MemInfo{*total, *available};
}

ProcHostMetrics::ProcHostMetrics(std::string state_dir, std::string proc_root)
    : state_dir_(std::move(state_dir)), proc_root_(std::move(proc_root)) {}

wire::HostMetrics ProcHostMetrics::Measure() {
  wire::HostMetrics m;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  m.cpu_cores = cores >= 1 ? cores : 1;

  const std::string loadavg_path = absl::StrCat(proc_root_, "/loadavg");
  std::optional<std::string> loadavg = ReadProcFile(loadavg_path, 4096);
  std::optional<std::string> load;
  if (loadavg) load = ParseLoadAverage(*loadavg);
  if (load) {
    m.load_1m = *load;
  } else {
    LogWarning("cannot read the load average", {{"path", loadavg_path}});
    m.load_1m.assign(1, '0');  // not = "0": gcc 12 -O2 false -Wrestrict (PR105329)
  }

  const std::string meminfo_path = absl::StrCat(proc_root_, "/meminfo");
  std::optional<std::string> meminfo = ReadProcFile(meminfo_path, 1 << 16);
  std::optional<MemInfo> mem;
  if (meminfo) mem = ParseMemInfo(*meminfo);
  if (mem) {
    m.memory_total_bytes = mem->total_bytes;
    m.memory_available_bytes = mem->available_bytes;
  } else {
    LogWarning("cannot read memory measurements", {{"path", meminfo_path}});
  }

  struct statvfs vfs;
  if (statvfs(state_dir_.c_str(), &vfs) == 0) {
    m.disk_total_bytes = SaturatingMul(vfs.f_blocks, vfs.f_frsize);
    m.disk_available_bytes = SaturatingMul(vfs.f_bavail, vfs.f_frsize);
  } else {
    LogWarning("cannot measure the state filesystem",
               {{"path", state_dir_}, {"errno", static_cast<int64_t>(errno)}});
  }
  return m;
}

}  // namespace sn::agent

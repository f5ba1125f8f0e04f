// A process's own figures for the metrics (resident memory, CPU seconds, open descriptors),
// read from /proc/<pid>/ (statm, stat, fd/). The agent's, and privhelper's through its answer.
#ifndef SANDBOX_NODE_COMMON_METRICS_PROCESS_FIGURES_H_
#define SANDBOX_NODE_COMMON_METRICS_PROCESS_FIGURES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sn::metrics {

struct ProcessFigures {
  int64_t resident_bytes = 0;
  double cpu_seconds = 0;  // user + system
  int64_t open_fds = 0;
};

// `dir` is "/proc/self" or "/proc/<pid>" (tests pass a fake tree).
absl::StatusOr<ProcessFigures> ReadProcessFigures(const std::string& dir = "/proc/self");

// utime + stime, in clock ticks, of a /proc/<pid>/stat line (fields 14 and 15, counted after
// the command name's closing parenthesis, which may itself hold spaces and parentheses).
std::optional<uint64_t> ParseStatCpuTicks(std::string_view stat);

}  // namespace sn::metrics

#endif  // SANDBOX_NODE_COMMON_METRICS_PROCESS_FIGURES_H_

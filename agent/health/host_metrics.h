// Host measurements for health reports (spec/wire.md §3 host): /proc and statvfs of the
// node's state directory. Paths and read errors go to the node's log, never to the wire.
#ifndef SANDBOX_NODE_AGENT_HEALTH_HOST_METRICS_H_
#define SANDBOX_NODE_AGENT_HEALTH_HOST_METRICS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/wire/frames.h"

namespace sn::agent {

class HostMetricsSource {
 public:
  virtual ~HostMetricsSource() = default;
  // sandboxes_active / sandboxes_retained are left 0: they are privhelper's counts, which
  // ProbeHealthSource fills in from its probe.
  virtual wire::HostMetrics Measure() = 0;
};

class ProcHostMetrics final : public HostMetricsSource {
 public:
  // `proc_root` is "/proc" except in tests.
  explicit ProcHostMetrics(std::string state_dir, std::string proc_root = "/proc");
  wire::HostMetrics Measure() override;

 private:
  std::string state_dir_;
  std::string proc_root_;
};

// The first field of /proc/loadavg in the wire's form (0|[1-9][0-9]{0,6})(\.[0-9]{1,6})?;
// nullopt when the text is not a load average.
std::optional<std::string> ParseLoadAverage(std::string_view loadavg);

struct MemInfo {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
};
// MemTotal and MemAvailable (kB in the file); nullopt when either is missing.
std::optional<MemInfo> ParseMemInfo(std::string_view meminfo);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_HEALTH_HOST_METRICS_H_

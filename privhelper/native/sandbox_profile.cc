#include "privhelper/native/sandbox_profile.h"

#include <nlohmann/json.hpp>

namespace sn::native::profile {

nlohmann::json SandboxHostConfig(int64_t cpu_millis, int64_t memory_bytes) {
  using json = nlohmann::json;
  json caps = json::array();
  for (const char* c : kCapabilities) caps.push_back(c);
  return json{
      {"NanoCpus", cpu_millis * 1000000},
      {"Memory", memory_bytes},
      {"MemorySwap", memory_bytes},  // equal to Memory: no swap
      {"PidsLimit", kPidsLimit},
      // Sandboxes get no network: the spec gives them none, and it is the safe default.
      {"NetworkMode", kNetworkMode},
      {"RestartPolicy", {{"Name", "no"}}},
      {"Init", true},
      {"SecurityOpt", json::array({kNoNewPrivileges})},
      {"CapDrop", json::array({"ALL"})},
      {"CapAdd", caps},
      {"Ulimits", json::array({{{"Name", "nofile"}, {"Soft", kOpenFiles}, {"Hard", kOpenFiles}},
                               {{"Name", "core"}, {"Soft", kCoreFileBytes}, {"Hard", kCoreFileBytes}}})},
      {"LogConfig", {{"Type", kLogDriver}, {"Config", json::object()}}},
  };
}

}  // namespace sn::native::profile

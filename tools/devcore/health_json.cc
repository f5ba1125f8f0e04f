#include "tools/devcore/health_json.h"

#include "common/diagnostics.h"
#include "nlohmann/json.hpp"

namespace sn::devcore {
namespace {

using json = nlohmann::json;

}  // namespace

std::string NormalizedDiagnosticCode(std::string_view code) {
  return std::string(DiagnosticCode(NormalizeDiagnostic(code)));
}

std::string HealthToJson(const wire::Health& h) {
  json o = json::object();
  if (h.provider_ready.has_value()) o["provider_ready"] = *h.provider_ready;
  if (h.diagnostic.has_value()) o["diagnostic"] = NormalizedDiagnosticCode(*h.diagnostic);
  o["observed_at"] = h.observed_at;
  json ops = json::array();
  for (const auto& op : h.active_operations) {
    ops.push_back({{"id", op.id},
                   {"operation", op.operation},
                   {"state", op.state == wire::ActiveState::kQueued ? "queued" : "running"}});
  }
  o["active_operations"] = std::move(ops);
  // load_1m travels as a JSON number; its exact text parses as one.
  json load = json::parse(h.host.load_1m, nullptr, false);
  if (load.is_discarded()) load = h.host.load_1m;
  o["host"] = {{"cpu_cores", h.host.cpu_cores},
               {"load_1m", std::move(load)},
               {"memory_total_bytes", h.host.memory_total_bytes},
               {"memory_available_bytes", h.host.memory_available_bytes},
               {"disk_total_bytes", h.host.disk_total_bytes},
               {"disk_available_bytes", h.host.disk_available_bytes},
               {"sandboxes_active", h.host.sandboxes_active},
               {"sandboxes_retained", h.host.sandboxes_retained}};
  return o.dump();
}

std::string ObservationsToJson(const std::vector<wire::Observation>& observations) {
  json a = json::array();
  for (const auto& ob : observations) {
    json o = {{"generation", ob.generation},
              {"specification_digest", ob.specification_digest},
              {"state", std::string(wire::GenerationStateName(ob.state))}};
    if (ob.diagnostic.has_value()) o["diagnostic"] = NormalizedDiagnosticCode(*ob.diagnostic);
    a.push_back(std::move(o));
  }
  return a.dump();
}

}  // namespace sn::devcore

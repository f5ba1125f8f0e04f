// JSON views of what a node reported, for the admin API: the health object and generation
// observations exactly as received (spec/wire.md §3 member names), except that every
// diagnostic is normalized (common/diagnostics.h: an unknown code becomes
// provider_unavailable).
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_HEALTH_JSON_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_HEALTH_JSON_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/wire/frames.h"

namespace sn::devcore {

// The §7 code Core stores for a reported diagnostic.
std::string NormalizedDiagnosticCode(std::string_view code);

std::string HealthToJson(const wire::Health& health);
std::string ObservationsToJson(const std::vector<wire::Observation>& observations);

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_HEALTH_JSON_H_

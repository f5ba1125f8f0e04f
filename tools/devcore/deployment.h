// devcore's generation policy towards one node (spec/wire.md §3, §6), in one place so the
// session (welcome, heartbeat_ack, retention_ack, request receipts), the configuration route
// and the admin API agree:
//
//   deployment  a generation-managing node's recorded deployment (PUT .../deployment); without
//               one, the current generation (--specification) as target, else the enrolled
//               generation; serving_generation null unless recorded. Nodes without generation
//               management have none.
//   announced   the enrolled generation, and every generation devcore has sent the node as
//               target or serving (NodeRecord::announced_generations, durable before sending).
//   keep        false only for a pair durably recorded as dropped for the node, and never for
//               the target or serving generation of its deployment; true for any other pair.
//
// Pure functions over the stores; callers run on devcore's event-loop thread.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_DEPLOYMENT_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_DEPLOYMENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/wire/frames.h"
#include "tools/devcore/node_store.h"
#include "tools/devcore/specification.h"

namespace sn::devcore {

// The deployment devcore announces to `node`; nullopt for a node without generation
// management, and when a generation it names is not held (a damaged state directory).
std::optional<wire::Deployment> DeploymentFor(const NodeRecord& node,
                                              const GenerationStore& generations);

// The generations a deployment names (target, and serving when set).
std::vector<int64_t> NamedGenerations(const wire::Deployment& deployment);

// The specification digest of `generation` when it is announced to `node`, else nullopt.
std::optional<std::string> AnnouncedDigest(const NodeRecord& node,
                                           const GenerationStore& generations,
                                           int64_t generation);

bool IsDropped(const NodeRecord& node, const GenerationRef& pair);

// The `keep` of one retention entry, given the node's current deployment (true whenever the
// deployment is unknown).
bool KeepInRetention(const NodeRecord& node, const std::optional<wire::Deployment>& deployment,
                     const GenerationRef& pair);

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_DEPLOYMENT_H_

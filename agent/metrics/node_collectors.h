// The families AgentMetrics reads when a scrape renders (agent_metrics.h): the request queue,
// the connection, the generations, the provider as privhelper's last probe saw it, and this
// process's own figures. Everything is read on the event loop, where these objects live.
#ifndef SANDBOX_NODE_AGENT_METRICS_NODE_COLLECTORS_H_
#define SANDBOX_NODE_AGENT_METRICS_NODE_COLLECTORS_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "agent/connection/connection.h"
#include "agent/generations/manager.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/privhelper_rpc/privhelper_client.h"
#include "agent/requests/request_queue.h"

namespace sn::agent {

// What the collectors read; every pointer outlives the AgentMetrics it is registered with.
struct NodeView {
  const RequestQueue* queue = nullptr;
  const GenerationManager* generations = nullptr;
  // The connection once start-up made it, else null.
  std::function<const Connection*()> connection;
  // privhelper's latest probe (the start-up probe, then each health report's).
  const std::optional<ProbeOutcome>* last_probe = nullptr;
  // The owner epoch of the latest live connection (0 before the first).
  const int64_t* owner_epoch = nullptr;
};

void AddNodeCollectors(AgentMetrics& metrics, NodeView view);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_METRICS_NODE_COLLECTORS_H_

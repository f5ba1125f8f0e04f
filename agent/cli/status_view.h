// `agent status --config=FILE [--json]`: one screen on the node (like `nomad node status`):
// the connection (state, Core origin, owner epoch, since when, how the last one ended), the
// provider and its readiness, serving and target generations, preparation progress (bytes of N,
// ETA), sandboxes against their bounds, requests of the last minute by outcome, the last error.
// Live figures come from the running agent's status socket (<state_dir>/status.sock, GET
// /status: agent/metrics/node_status.h); with the agent stopped it says so and shows the
// durable facts (identity, pins, owner epoch, the last preparation records); whether privhelper
// answers is asked of privhelper itself (ListGenerations, read-only). Never writes anything.
// Exit 0 when it could report, 1 when the agent's state cannot be read (no identity), 2 usage.
#ifndef SANDBOX_NODE_AGENT_CLI_STATUS_VIEW_H_
#define SANDBOX_NODE_AGENT_CLI_STATUS_VIEW_H_

#include <cstdio>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/cli/generations_view.h"
#include "agent/state/config.h"
#include "agent/state/state_files.h"

namespace sn::agent {

struct StatusInputs {
  absl::StatusOr<NodeIdentity> identity = absl::UnavailableError("not read");
  absl::StatusOr<int64_t> owner_epoch = absl::UnavailableError("not read");
  GenerationsInputs durable;  // pins, progress records, privhelper's answer
  // The running agent's document (JSON text), or why there is none.
  absl::StatusOr<std::string> live = absl::UnavailableError("not asked");
};

// GET /status on the agent's status socket, at most 64 KiB, within `timeout`.
absl::StatusOr<std::string> FetchLiveStatus(const std::string& socket_path,
                                            absl::Duration timeout = absl::Seconds(2));

StatusInputs ReadStatusInputs(const AgentConfig& config);

// One JSON object (docs/operator-guide.md, "agent status": its members).
std::string FormatStatusJson(const StatusInputs& in);
std::string FormatStatusText(const StatusInputs& in);

int RunStatusCommand(const AgentConfig& config, bool json, std::FILE* out, std::FILE* err);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CLI_STATUS_VIEW_H_

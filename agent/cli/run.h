// `agent run`: the node process. Wires the connection state machine, the Beast transport, the
// request queue with its durable record, privhelper (probe and execute) and host measurements
// onto one asio event loop, and runs until stopped (SIGTERM/SIGINT) or the credential is
// rejected.
#ifndef SANDBOX_NODE_AGENT_CLI_RUN_H_
#define SANDBOX_NODE_AGENT_CLI_RUN_H_

#include "agent/state/config.h"

namespace sn::agent {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitCredentialRejected = 3;

// Returns the process exit code: 0 after a clean stop, 3 when Core rejected the credential
// (401 or close 4004), 1 for any other failure (logged).
int RunAgent(const AgentConfig& config);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CLI_RUN_H_

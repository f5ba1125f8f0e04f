// Step 7b of sandbox-node-install (docs/operator-guide.md): the agent's side of an enrollment
// the installer made. Everything inside the agent's state directory is read and written by a
// child process with the agent's credentials (root never follows a path the agent's user
// controls): an existing node identity must be the enrolled node; otherwise the credential and
// the pending enrollment (agent/state/state_files.h) are written, or kept when they are already
// exactly these. Called from the installer's run only; blocks until the child exits.
#ifndef SANDBOX_NODE_TOOLS_INSTALL_AGENT_STATE_H_
#define SANDBOX_NODE_TOOLS_INSTALL_AGENT_STATE_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/state/state_files.h"
#include "tools/install/record.h"
#include "tools/install/system.h"

namespace sn::install {

// The node identity the agent's files must hold for this installation record.
agent::NodeIdentity IdentityOf(const InstallRecord& rec);

enum class AgentState {
  kEnrolled,      // identity.json exists and names the enrolled node
  kWrotePending,  // credential and pending enrollment written now
  kKeptPending,   // they were already there, exactly these
};

// Refuse(...) (record.h) naming the file for another node's identity or another pending
// enrollment, and for any failure inside the child; an error of the pipe itself as it is.
absl::StatusOr<AgentState> EnsureAgentStateAs(const std::string& agent_state_dir,
                                              const InstallRecord& rec, const SystemUser& user);

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_AGENT_STATE_H_

// The seam between the connection state machine (connection.h) and generation management
// (generations/manager.h) for a generation-managing node (spec/wire.md §3): the deployment
// facts each welcome and heartbeat_ack carry go in, the generation observations of each hello
// and heartbeat come out, and the end of a live connection is announced (it cancels a
// preparation in progress; nothing is prepared again before the next connection delivered
// deployment facts). Single-threaded: every method runs on the agent's event loop.
#ifndef SANDBOX_NODE_AGENT_CONNECTION_GENERATION_CONTROL_H_
#define SANDBOX_NODE_AGENT_CONNECTION_GENERATION_CONTROL_H_

#include <vector>

#include "common/wire/frames.h"

namespace sn::agent {

class GenerationControl {
 public:
  virtual ~GenerationControl() = default;
  // The deployment facts of a welcome or heartbeat_ack of the live connection.
  virtual void OnDeployment(const wire::Deployment& deployment) = 0;
  // The live connection (one that got its welcome) ended.
  virtual void OnDisconnected() = 0;
  // The observations of the next hello or heartbeat (at most 8; target and serving first,
  // the rest rotating). Each call advances the rotation.
  virtual std::vector<wire::Observation> NextObservations() = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_GENERATION_CONTROL_H_

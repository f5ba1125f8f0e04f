// The seam between the connection state machine (connection.h) and the node's retention
// decisions (generations/retention.h) for a generation-managing node (spec/wire.md §3,
// retention and retention_ack). The Connection owns the exchange itself: at most one pending
// per connection, a fresh uuid, the sequence from 1 increasing by exactly one, the 30 s ack
// deadline (4008), and the strict match of the ack against the complete pending request
// (4006 otherwise: nothing reaches this seam). The decisions behind the seam choose what to
// ask about and act on matched answers only. Retention never goes through the request queue.
// Single-threaded: every method runs on the agent's event loop.
#ifndef SANDBOX_NODE_AGENT_CONNECTION_RETENTION_CONTROL_H_
#define SANDBOX_NODE_AGENT_CONNECTION_RETENTION_CONTROL_H_

#include <vector>

#include "common/wire/frames.h"

namespace sn::agent {

class RetentionControl {
 public:
  virtual ~RetentionControl() = default;
  // A connection got its welcome (its deployment facts were delivered first).
  virtual void OnLive() = 0;
  // That connection ended: a pending exchange is discarded, and every drop grant it gave is
  // void from now on.
  virtual void OnLiveEnded() = 0;
  // The entries of the next retention request (1..8 unique pairs, keep absent), or none when
  // nothing is to be asked now. Called only while live with no exchange pending: right after
  // welcome and at every heartbeat tick.
  virtual std::vector<wire::RetentionEntry> NextRetentionRequest() = 0;
  // The ack that matched the pending request exactly: the same pairs in the same order, each
  // with its keep. A keep false is a drop grant of the current connection only.
  virtual void OnRetentionAnswer(const std::vector<wire::RetentionEntry>& answers) = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_RETENTION_CONTROL_H_

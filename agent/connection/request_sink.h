// The seam between the connection state machine (connection.h) and the request layer
// (agent/requests/request_queue.h). Connection hands every request whose envelope, connection_id
// and owner_epoch matched to a RequestSink, and asks it for the advisory active operations of each
// health report. Single-threaded: every method runs on the agent's event loop, and `send` may only
// be called there.
#ifndef SANDBOX_NODE_AGENT_CONNECTION_REQUEST_SINK_H_
#define SANDBOX_NODE_AGENT_CONNECTION_REQUEST_SINK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/wire/frames.h"

namespace sn::agent {

// What a live connection is; handed to the request layer.
struct LiveConnection {
  std::string connection_id;
  int64_t owner_epoch = 0;
};

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // A welcome was accepted; `send` queues a text frame on this connection (a no-op once the
  // connection is closing or gone).
  virtual void OnLive(const LiveConnection& live, std::function<void(std::string)> send) = 0;
  // A request whose envelope, connection_id and owner_epoch matched. Returns the close code
  // when the request must close the connection (sequence 4006, queue full 4007), else 0.
  virtual int OnRequest(wire::Request request) = 0;
  // The live connection ended (pending exchanges are discarded).
  virtual void OnGone() = 0;
  // The advisory active operations for the next health report (at most 32).
  virtual std::vector<wire::ActiveOperation> ActiveOperations() = 0;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_REQUEST_SINK_H_

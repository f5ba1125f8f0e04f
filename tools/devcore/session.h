// Core's side of one node WebSocket connection (spec/wire.md §1-§3), as a pure state machine:
// it reads time from an injected Clock, schedules its deadlines on an injected TimerQueue and
// talks to the socket only through SessionTransport, so every rule is unit-tested with
// SimulatedClock and a fake transport. The Beast server (server_*.cc) adapts real sockets.
//
// Retention (§3): Core answers each retention synchronously, so at most one exchange is ever
// pending on Core's side; devcore enforces the per-connection sequence (1, then +1), the
// connection and epoch, and refuses retention from a node without generation management
// (4006). keep is decided by deployment.h from durable drops.
//
// Life of a session: the server authenticates the upgrade (401), claims the node's connection
// slot (409), accepts the upgrade and calls Start(). Then:
//   awaiting hello  -- valid hello, identity matches --> live (welcome sent)
//   any state       -- rule broken / deadline -------> closing (close frame sent)
//   closing         -- OnTransportClosed -------------> closed
// REQUIRES (thread): every method runs on the one event-loop thread that runs the timers.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_SESSION_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_SESSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/wire/frames.h"
#include "tools/devcore/node_store.h"
#include "tools/devcore/request_tracker.h"
#include "tools/devcore/specification.h"

namespace sn::devcore {

// The socket side of a session. Implementations queue writes in order.
class SessionTransport {
 public:
  virtual ~SessionTransport() = default;
  // Sends one text message (fragmented at 1 MiB by the implementation).
  virtual void SendText(std::string message) = 0;
  // Sends a close frame with `code` after the queued messages, then tears the socket down.
  // No message is delivered to the session after this call.
  virtual void Close(int code, std::string_view reason) = 0;
  // The largest message the next reads accept; a larger one closes with 1009.
  virtual void SetReadLimit(size_t bytes) = 0;
};

struct SessionEnv {
  NodeStore* store = nullptr;
  // Every generation devcore holds; the deployment policy is deployment.h.
  const GenerationStore* generations = nullptr;
  const Clock* clock = nullptr;
  TimerQueue* timers = nullptr;
};

class Session {
 public:
  enum class State { kAwaitingHello, kLive, kClosing, kClosed };

  // `node_id` and `credential` are what the upgrade request authenticated with.
  // REQUIRES: env members non-null; `transport` outlives the session.
  Session(SessionEnv env, SessionTransport* transport, std::string node_id,
          std::string credential);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The upgrade was accepted: arms the 15 s hello deadline and the 35 s idle timer.
  void Start();
  // Any WebSocket frame arrived (data, continuation, ping, pong): resets the idle timer.
  void OnFrameActivity();
  // A complete message arrived; `text` is false for a binary message.
  void OnMessage(std::string_view payload, bool text);
  // The socket is gone (after our close, the peer's close or an error).
  void OnTransportClosed();
  // Closes the connection from outside (e.g. 4005 after an owner-epoch bump). No-op unless
  // awaiting hello or live.
  void CloseWith(int code, std::string_view reason);

  State state() const { return state_; }
  bool live() const { return state_ == State::kLive; }
  const std::string& node_id() const { return node_id_; }
  // Set once live.
  const std::string& connection_id() const { return connection_id_; }
  int64_t owner_epoch() const { return owner_epoch_; }
  // The close code this session sent, if it closed the connection.
  std::optional<int> close_code() const { return close_code_; }

  // Sends a provider request on this connection (see request_tracker.h); `done` runs once.
  // Answers 409 unless live.
  void SendRequest(const AdminRequest& req, RequestDone done);
  void SendRequest(PreparedRequest req, RequestDone done);
  size_t pending_requests() const { return requests_.pending(); }

 private:
  void OnHello(const wire::Hello& hello);
  void OnHeartbeat(const wire::Heartbeat& hb);
  void OnRetention(const wire::Retention& r);
  void OnResponse(const wire::Response& r, std::string_view raw);
  void ArmIdle();
  // The deployment to announce in welcome / heartbeat_ack, recorded as announced (durably)
  // first. nullopt for a node without generation management. On a failure (no held
  // generation, or the state file cannot be written) it closes with 1011 and sets *failed.
  std::optional<wire::Deployment> AnnounceDeployment(const NodeRecord& node, bool* failed);
  void RecordHealth(const wire::Health& health,
                    const std::vector<wire::Observation>* generations);
  void Send(const wire::Frame& frame);

  SessionEnv env_;
  SessionTransport* transport_;
  std::string node_id_;
  std::string credential_;
  State state_ = State::kAwaitingHello;
  std::string connection_id_;
  int64_t owner_epoch_ = 0;
  bool generation_management_ = false;
  int64_t retention_sequence_ = 0;
  std::optional<int> close_code_;
  std::unique_ptr<Timer> hello_timer_;
  std::unique_ptr<Timer> idle_timer_;
  RequestTracker requests_;
};

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_SESSION_H_

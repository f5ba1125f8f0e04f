// The agent's connection state machine (spec/wire.md §1, §3): dial, hello, welcome and the
// owner epoch, heartbeats, idle timeout, close codes and reconnect backoff. Pure logic: it
// acts through Transport, TimerQueue, HealthSource and EpochStore and takes time from Clock,
// so tests drive it with SimulatedClock and fakes. Single-threaded: every method and callback
// runs on the owner's event loop.
#ifndef SANDBOX_NODE_AGENT_CONNECTION_CONNECTION_H_
#define SANDBOX_NODE_AGENT_CONNECTION_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "agent/connection/backoff.h"
#include "agent/connection/generation_control.h"
#include "agent/connection/health.h"
#include "agent/connection/request_sink.h"
#include "agent/connection/retention_control.h"
#include "agent/connection/transport.h"
#include "agent/state/state_files.h"
#include "common/clock.h"
#include "common/wire/frames.h"

namespace sn::agent {

struct ConnectionParams {
  std::string node_id;
  std::string installation_id;
  std::string provider;
  int64_t deployment_generation = 0;
  std::string specification_digest;
  // privhelper's limits from the agent's start-up probe. A hello reports the limits of its own
  // health probe when that probe had them (HealthReport::limits), else these.
  ProviderLimits limits;
  bool generation_management = false;
  // A generation-managing node's deployment facts go here and its observations come from
  // here (must outlive the Connection). Null: such a node reports no observations.
  GenerationControl* generations = nullptr;
  // A generation-managing node's retention decisions (must outlive the Connection). Null: it
  // sends no retention request, and every retention_ack is unsolicited (4006).
  RetentionControl* retention = nullptr;
  // What the agent's metrics count (agent/metrics/agent_metrics.h); each may be empty. Called
  // on the event loop.
  struct Events {
    // A connection became live with this owner epoch.
    std::function<void(int64_t owner_epoch)> live;
    // A dial or a connection ended and a redial follows: the close code ("1006" when the
    // connection ended without a close frame), or "http_<status>" / "unreachable" for a dial
    // that never upgraded.
    std::function<void(std::string_view why)> redial;
    std::function<void()> heartbeat_sent;
    // A heartbeat tick found the previous health report still being collected.
    std::function<void()> heartbeat_missed;
    // A retention exchange ended: "all_kept", "drop_granted" (at least one entry not kept),
    // "timed_out" (no retention_ack in 30 s: 4008) or "mismatched" (a retention_ack that does
    // not answer the pending request: 4006).
    std::function<void(std::string_view outcome)> retention;
  } events;
};

class Connection final : public TransportEvents {
 public:
  enum class State {
    kIdle,           // not started
    kDialing,        // Dial() outstanding
    kAwaitingHello,  // upgraded; collecting the first health report
    kAwaitingWelcome,
    kLive,
    kClosing,        // we sent a close frame; waiting for OnClosed
    kBackoff,        // waiting to redial
    kStopped,        // permanent: credential rejected, or Stop()
  };

  // `done` runs once when the connection stops for good: Unauthenticated after a 401 or a
  // 4004 close, OK after Stop(). Pointers must outlive the Connection. `requests` may be null
  // (then every request closes with 4006: nothing can answer it).
  Connection(ConnectionParams params, Transport* transport, const Clock* clock,
             TimerQueue* timers, HealthSource* health, EpochStore* epochs, Backoff backoff,
             RequestSink* requests, std::function<void(absl::Status)> done);
  ~Connection() override;

  // Dials for the first time.
  void Start();
  // Closes with 1001 (going away) and stops reconnecting; `done` runs with OK once closed.
  void Stop();

  State state() const { return state_; }
  const std::optional<LiveConnection>& live() const { return live_; }
  // The delay chosen for the pending redial (tests and logs).
  absl::Duration last_backoff_delay() const { return last_backoff_delay_; }

  // TransportEvents.
  void OnDialResult(const DialResult& result) override;
  void OnActivity() override;
  void OnMessage(std::string payload, bool text) override;
  void OnClosed(const CloseInfo& info) override;

 private:
  void Dial();
  void SendHello(HealthReport report);
  void HandleWelcome(const wire::Welcome& w);
  void HandleHeartbeatAck(const wire::HeartbeatAck& ack);
  void HeartbeatTick();
  void SendHeartbeat(HealthReport report);
  void ArmIdleTimer();
  void IdleCheck();
  // Sends a close frame with `code`; the reconnect follows OnClosed.
  void CloseWith(int code, std::string_view reason);
  // The connection attempt ended: schedule the next one (or stop).
  void ScheduleRedial(bool identity_mismatch);
  void StopForGood(absl::Status status);
  // The live connection ended: pending requests are dropped, preparation is cancelled.
  void LiveEnded();
  void CancelConnectionTimers();
  wire::Health PrepareHealth(wire::Health h);
  // Starts a retention exchange when none is pending and the decisions want one.
  void MaybeStartRetention();
  void HandleRetentionAck(const wire::RetentionAck& ack);
  void RetentionTimedOut(uint64_t attempt, int64_t sequence);

  ConnectionParams params_;
  Transport* transport_;
  const Clock* clock_;
  TimerQueue* timers_;
  HealthSource* health_;
  EpochStore* epochs_;
  Backoff backoff_;
  RequestSink* requests_;
  std::function<void(absl::Status)> done_;

  State state_ = State::kIdle;
  // Incremented for every dial: async health results of an older attempt are dropped.
  uint64_t attempt_ = 0;
  int sent_close_code_ = 0;  // the code of our own close frame on this connection, 0 = none
  bool stop_requested_ = false;
  bool heartbeat_in_flight_ = false;
  std::optional<LiveConnection> live_;
  std::optional<MonoTime> live_since_;
  MonoTime last_activity_ = absl::ZeroDuration();
  absl::Duration last_backoff_delay_ = absl::ZeroDuration();
  std::unique_ptr<Timer> idle_timer_;
  std::unique_ptr<Timer> heartbeat_timer_;
  std::unique_ptr<Timer> redial_timer_;
  // The retention exchange of the live connection (spec §3): at most one pending; the
  // sequence of the next one (1 for the first of a connection).
  std::optional<wire::Retention> retention_pending_;
  std::unique_ptr<Timer> retention_timer_;
  int64_t next_retention_sequence_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

std::string_view ConnectionStateName(Connection::State s);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_CONNECTION_H_

// The agent's request path (spec/wire.md §4-§5), behind Connection's RequestSink:
//   - sequence exactly +1 per connection (4006), at most 32 pending per connection (4007);
//   - request-layer failures answer `invalid`; the generation gate (generation_gate.h)
//     decides whether the generation the request names can run it: `unconfirmed` for a
//     generation the node does not hold (or that is not ready, for create and a starting
//     resume), `invalid` for a create naming an image the generation's specification lacks;
//   - a node-wide bound on operations in flight across connections answers `unavailable`;
//   - budgets anchored to the monotonic clock on receipt, consumed while queued; at expiry the
//     answer is `unavailable` (not started) or `uncertain` (started). A started operation is
//     not cancelled: privhelper anchors the same budget and signals the native helper itself
//     (executor.h), and its final outcome is still recorded;
//   - requests naming the same sandbox run in sequence order, different sandboxes concurrently;
//   - payloads wait for privhelper's admission bound: a write_file or exec with a payload
//     starts only while the payload bytes started and not yet answered, its own included, fit
//     `payload_bytes_limit` (privhelper's kMaxInflightRequestBytes); otherwise it waits, still
//     `queued` (not started), in one FIFO in the order the requests became ready to start (the
//     head of their sandbox's order), and every answer of a payload call (success, error,
//     privhelper's refusal or loss) frees its bytes and starts the waiting heads that fit then.
//     A small payload behind a large one waits too (docs/protocol.md 23a). A waiting request
//     is an operation in flight like any other: it holds its decoded request, which the
//     node-wide bound and the 32 pending per connection already count, so waiting adds no
//     memory the agent's stated bound (64 operations in flight) does not cover; its budget
//     runs while it waits and its expiry answers `unavailable` with no native call;
//   - mutations are recorded durably (operation_record.h); observe answers from the record;
//     a request id the node already holds is never executed again.
// Responses go to the connection a request arrived on, and are dropped once it is gone.
// Retention traffic never passes through here (retention_control.h); the retention decisions
// only read CallsOn.
#ifndef SANDBOX_NODE_AGENT_REQUESTS_REQUEST_QUEUE_H_
#define SANDBOX_NODE_AGENT_REQUESTS_REQUEST_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/connection/request_sink.h"
#include "agent/requests/executor.h"
#include "agent/requests/generation_gate.h"
#include "agent/requests/operation_record.h"
#include "common/clock.h"

namespace sn::agent {

struct RequestQueueOptions {
  // Which generation runs a request (must outlive the queue; required).
  GenerationGate* gate = nullptr;
  // Node-wide bound on operations in flight across connections (spec: at least 64).
  size_t node_wide_limit = 64;
  // Payload bytes (plus payload_overhead_bytes per call with a payload) of the calls started
  // and not yet answered; a payload that would exceed it waits (above). 0: no bound (tests of
  // other rules). The agent sets privhelper's kMaxInflightRequestBytes and
  // kMaxRequestMessageBytes (proto/execute_stream.h).
  size_t payload_bytes_limit = 0;
  size_t payload_overhead_bytes = 0;
  // Each answer's operation (its wire name as received), outcome ("success" or the error
  // code) and time since the request's frame arrived (the agent's metrics); may be empty.
  std::function<void(std::string_view operation, std::string_view outcome,
                     absl::Duration latency)>
      on_answered;
};

// A request's result as its record keeps it: the mutations' results (create, resume, exec,
// write_file); nullopt for any other.
std::optional<wire::MutationResult> ToMutationResult(const std::optional<wire::Result>& r);

class RequestQueue final : public RequestSink {
 public:
  RequestQueue(RequestQueueOptions options, const Clock* clock, TimerQueue* timers,
               OperationRecord* record, OperationExecutor* executor);
  ~RequestQueue() override;

  // RequestSink.
  void OnLive(const LiveConnection& live, std::function<void(std::string)> send) override;
  int OnRequest(wire::Request request) override;
  void OnGone() override;
  std::vector<wire::ActiveOperation> ActiveOperations() override;

  size_t in_flight() const { return ops_.size(); }
  // Operations naming `generation` that are queued or running, whatever connection they
  // arrived on: each is a reference that keeps the generation from collection until the
  // executor's answer arrived (one whose budget ended while running still counts).
  size_t CallsOn(int64_t generation) const;
  size_t pending() const { return live_ ? live_->pending : 0; }
  // Payload bytes counted for the calls started and not yet answered; requests waiting for
  // them to fit the bound.
  size_t payload_bytes_in_flight() const { return payload_in_flight_; }
  size_t payloads_waiting() const { return payload_waiting_.size(); }

 private:
  struct Live {
    uint64_t token = 0;
    std::string connection_id;
    std::function<void(std::string)> send;
    int64_t next_sequence = 1;
    size_t pending = 0;
  };
  struct Op {
    wire::Request request;
    uint64_t conn_token = 0;
    bool mutation = false;
    bool running = false;
    bool answered = false;
    bool waiting = false;       // in payload_waiting_
    size_t payload_cost = 0;    // counted against payload_bytes_limit when started (0: none)
    bool payload_held = false;  // payload_cost is in payload_in_flight_
    std::string sandbox_key;  // empty for operations without a sandbox
    MonoTime received;        // on the monotonic clock
    MonoTime deadline;        // receipt + timeout_ms on the monotonic clock
    std::unique_ptr<Timer> budget;
  };

  // Every answer passes here (options_.on_answered sees it, sent or not): `operation` and
  // `received` are the request's, for the metrics.
  void Respond(uint64_t conn_token, const std::string& id, const ExecOutcome& outcome,
               std::string_view operation, MonoTime received);
  void RespondError(uint64_t conn_token, const std::string& id, const char* code,
                    std::string_view operation, MonoTime received);
  void Admit(wire::Request request, bool mutation);
  void TryStart(const std::string& sandbox_key);
  void Start(const std::string& id);
  void Run(const std::string& id);
  bool PayloadFits(size_t cost) const;
  void StartWaitingPayloads();
  void OnDone(const std::string& id, ExecOutcome outcome);
  void OnBudgetExpired(const std::string& id);
  void Finish(const std::string& id);
  // Nullopt once the outcome is durable; else the error code the entry completed with in
  // memory, as the next start will complete it (OperationRecord::CompleteInMemoryAsRecoverWould).
  std::optional<std::string> RecordOutcome(Op& op, const ExecOutcome& outcome);
  ExecOutcome Observe(const wire::ObserveArgs& args) const;

  RequestQueueOptions options_;
  const Clock* clock_;
  TimerQueue* timers_;
  OperationRecord* record_;
  OperationExecutor* executor_;
  std::optional<Live> live_;
  uint64_t next_token_ = 0;
  std::map<std::string, std::unique_ptr<Op>> ops_;
  std::map<std::string, std::deque<std::string>> by_sandbox_;
  size_t payload_in_flight_ = 0;
  std::deque<std::string> payload_waiting_;  // FIFO of ids, each its sandbox's head
  bool starting_waiting_ = false;            // StartWaitingPayloads is on the stack
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_REQUESTS_REQUEST_QUEUE_H_

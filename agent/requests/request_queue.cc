#include "agent/requests/request_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/wire/codec.h"
#include "common/wire/limits.h"

namespace sn::agent {
namespace {

constexpr char kInvalid[] = "invalid";
constexpr char kUnconfirmed[] = "unconfirmed";
constexpr char kUnavailable[] = "unavailable";
constexpr char kUncertain[] = "uncertain";
constexpr char kConflict[] = "conflict";

ExecOutcome ErrorOutcome(const char* code) {
  ExecOutcome o;
  o.error_code = code;
  return o;
}


std::optional<wire::Result> FromMutationResult(const std::optional<wire::MutationResult>& r) {
  if (!r.has_value()) return std::nullopt;
  return std::visit([](const auto& v) { return wire::Result(v); }, *r);
}

ExecOutcome FromRecorded(const wire::RecordedResponse& r) {
  ExecOutcome o;
  o.result = FromMutationResult(r.result);
  o.error_code = r.error_code;
  o.create_settled = r.create_settled;
  o.unsupported = r.unsupported;
  return o;
}

// The bytes of the payload privhelper's Execute stream carries after the request message
// (proto/execute_stream.h): write_file's content, exec's stdin. 0 without one (a call made as
// a unary call).
size_t PayloadBytes(const wire::Arguments& args) {
  if (const auto* w = std::get_if<wire::WriteFileArgs>(&args)) return w->content.size();
  if (const auto* e = std::get_if<wire::ExecArgs>(&args)) {
    return e->stdin_bytes.has_value() ? e->stdin_bytes->size() : 0;
  }
  return 0;
}

}  // namespace

std::optional<wire::MutationResult> ToMutationResult(const std::optional<wire::Result>& r) {
  if (!r.has_value()) return std::nullopt;
  if (auto* v = std::get_if<wire::CreateResult>(&*r)) return wire::MutationResult(*v);
  if (auto* v = std::get_if<wire::ResumeResult>(&*r)) return wire::MutationResult(*v);
  if (auto* v = std::get_if<wire::ExecResult>(&*r)) return wire::MutationResult(*v);
  if (auto* v = std::get_if<wire::WriteFileResult>(&*r)) return wire::MutationResult(*v);
  return std::nullopt;
}

RequestQueue::RequestQueue(RequestQueueOptions options, const Clock* clock, TimerQueue* timers,
                           OperationRecord* record, OperationExecutor* executor)
    : options_(std::move(options)),
      clock_(clock),
      timers_(timers),
      record_(record),
      executor_(executor) {}

RequestQueue::~RequestQueue() { alive_.reset(); }

void RequestQueue::OnLive(const LiveConnection& live, std::function<void(std::string)> send) {
  live_ = Live{++next_token_, live.connection_id, std::move(send), 1, 0};
}

void RequestQueue::OnGone() { live_.reset(); }

std::vector<wire::ActiveOperation> RequestQueue::ActiveOperations() {
  std::vector<wire::ActiveOperation> out;
  for (const auto& [id, op] : ops_) {
    if (out.size() >= wire::kMaxActiveOperations) break;
    out.push_back({id, op->request.operation_name,
                   op->running ? wire::ActiveState::kRunning : wire::ActiveState::kQueued});
  }
  return out;
}

size_t RequestQueue::CallsOn(int64_t generation) const {
  size_t n = 0;
  for (const auto& [id, op] : ops_) {
    if (op->request.generation == generation) ++n;
  }
  return n;
}

void RequestQueue::Respond(uint64_t conn_token, const std::string& id,
                           const ExecOutcome& outcome, std::string_view operation,
                           MonoTime received) {
  if (options_.on_answered) {
    options_.on_answered(operation, outcome.error_code.value_or("success"),
                         clock_->Monotonic() - received);
  }
  if (!live_.has_value() || live_->token != conn_token) return;  // its connection is gone
  wire::Response r;
  r.id = id;
  r.connection_id = live_->connection_id;
  r.result = outcome.result;
  r.error_code = outcome.error_code;
  r.create_settled = outcome.create_settled;
  r.unsupported = outcome.unsupported;
  if (live_->pending > 0) --live_->pending;
  live_->send(wire::Encode(wire::Frame(std::move(r))));
}

void RequestQueue::RespondError(uint64_t conn_token, const std::string& id, const char* code,
                                std::string_view operation, MonoTime received) {
  LogInfo("request answered without running", {{"id", id}, {"error_code", code}});
  Respond(conn_token, id, ErrorOutcome(code), operation, received);
}

int RequestQueue::OnRequest(wire::Request req) {
  if (!live_.has_value()) return wire::kCloseCorrelation;
  const MonoTime received = clock_->Monotonic();
  if (req.sequence != live_->next_sequence) {
    LogWarning("request sequence out of order",
               {{"sequence", req.sequence}, {"expected", live_->next_sequence}});
    return wire::kCloseCorrelation;
  }
  ++live_->next_sequence;
  if (live_->pending >= wire::kMaxPendingRequests) {
    LogWarning("a request arrived while 32 were pending");
    return wire::kCloseQueueFull;
  }
  ++live_->pending;
  const uint64_t token = live_->token;
  if (req.request_error.has_value()) {
    LogInfo("invalid request", {{"id", req.id}, {"reason", *req.request_error}});
    RespondError(token, req.id, kInvalid, req.operation_name, received);
    return 0;
  }
  if (ops_.count(req.id)) {
    RespondError(token, req.id, kUncertain, req.operation_name, received);  // queued or running: never executed twice
    return 0;
  }
  if (const RecordEntry* e = record_->Find(req.id)) {
    if (e->state == RecordState::kCompleted) {
      Respond(token, req.id, FromRecorded(*e->response), req.operation_name, received);
    } else {
      RespondError(token, req.id, kUncertain, req.operation_name, received);
    }
    return 0;
  }
  switch (options_.gate->Admit(req)) {
    case GateAnswer::kRun:
      break;
    case GateAnswer::kUnconfirmed:
      RespondError(token, req.id, kUnconfirmed, req.operation_name, received);
      return 0;
    case GateAnswer::kInvalid:
      LogInfo("invalid request", {{"id", req.id}, {"reason", "create.image not in spec"}});
      RespondError(token, req.id, kInvalid, req.operation_name, received);
      return 0;
  }
  if (req.operation == wire::Operation::kObserve) {
    Respond(token, req.id, Observe(std::get<wire::ObserveArgs>(req.args)), req.operation_name, received);
    return 0;
  }
  if (ops_.size() >= options_.node_wide_limit) {
    RespondError(token, req.id, kUnavailable, req.operation_name, received);
    return 0;
  }
  const bool mutation = wire::IsMutationRequest(req.operation, req.args);
  if (mutation) {
    absl::Status st = record_->Accept(req.id, wire::OperationName(req.operation),
                                      SandboxOf(req.args), req.generation);
    if (!st.ok()) {
      // Not recorded, so never run: nothing native started (`unavailable`). At the record's
      // bound (ResourceExhausted) this is the answer until expired records are pruned.
      LogError(absl::IsResourceExhausted(st) ? "the operation record is full; refusing a mutation"
                                             : "cannot record a mutation; refusing it",
               {{"id", req.id}, {"error", std::string(st.message())}});
      RespondError(token, req.id, kUnavailable, req.operation_name, received);
      return 0;
    }
  }
  Admit(std::move(req), mutation);
  return 0;
}

void RequestQueue::Admit(wire::Request request, bool mutation) {
  auto op = std::make_unique<Op>();
  const std::string id = request.id;
  op->conn_token = live_->token;
  op->mutation = mutation;
  op->sandbox_key = SandboxOf(request.args);
  if (options_.payload_bytes_limit > 0) {
    const size_t payload = PayloadBytes(request.args);
    if (payload > 0) op->payload_cost = payload + options_.payload_overhead_bytes;
  }
  const absl::Duration budget = absl::Milliseconds(request.timeout_ms);
  op->received = clock_->Monotonic();
  op->deadline = op->received + budget;
  op->request = std::move(request);
  std::weak_ptr<bool> alive = alive_;
  op->budget = timers_->After(budget, [this, alive, id] {
    if (!alive.expired()) OnBudgetExpired(id);
  });
  const std::string key = op->sandbox_key;
  // One line per request, when it finishes (OnDone); a mutation also when it is accepted, so
  // a long one shows while it runs. Not both for every inspect: each line is a write(2) on
  // the request's path (docs/performance.md, "Node overhead on inspect").
  if (mutation) {
    LogInfo("request accepted", {{"id", id}, {"operation", op->request.operation_name}});
  }
  ops_[id] = std::move(op);
  by_sandbox_[key].push_back(id);
  TryStart(key);
}

void RequestQueue::TryStart(const std::string& key) {
  auto it = by_sandbox_.find(key);
  if (it == by_sandbox_.end()) return;
  if (it->second.empty()) {
    by_sandbox_.erase(it);
    return;
  }
  const std::string head = it->second.front();
  auto op = ops_.find(head);
  if (op == ops_.end() || op->second->running || op->second->waiting) return;
  Start(head);
}

// A call fits while nothing else is counted (so one call is never held back by the bound
// alone) or while its bytes fit beside the counted ones.
bool RequestQueue::PayloadFits(size_t cost) const {
  return payload_in_flight_ == 0 || cost <= options_.payload_bytes_limit - std::min(
                                                options_.payload_bytes_limit, payload_in_flight_);
}

void RequestQueue::Start(const std::string& id) {
  Op& op = *ops_.at(id);
  if (op.payload_cost > 0) {
    // Arrival order: behind any request already waiting, even one this would fit beside.
    if (!payload_waiting_.empty() || !PayloadFits(op.payload_cost)) {
      op.waiting = true;
      payload_waiting_.push_back(id);
      LogInfo("payload waits for privhelper's admission bound",
              {{"id", id},
               {"bytes", static_cast<int64_t>(op.payload_cost)},
               {"in_flight_bytes", static_cast<int64_t>(payload_in_flight_)},
               {"waiting", static_cast<int64_t>(payload_waiting_.size())}});
      return;
    }
    op.payload_held = true;
    payload_in_flight_ += op.payload_cost;
  }
  Run(id);
}

// Starts the waiting payloads from the head of the FIFO while each fits. Re-entrant calls
// (a start that finishes at once, e.g. a failed record, frees bytes and lands here) return:
// the outer loop goes on.
void RequestQueue::StartWaitingPayloads() {
  if (starting_waiting_) return;
  starting_waiting_ = true;
  while (!payload_waiting_.empty()) {
    const std::string id = payload_waiting_.front();
    auto it = ops_.find(id);
    if (it == ops_.end()) {  // not expected: Finish removes its id
      payload_waiting_.pop_front();
      continue;
    }
    Op& op = *it->second;
    if (!PayloadFits(op.payload_cost)) break;
    payload_waiting_.pop_front();
    op.waiting = false;
    op.payload_held = true;
    payload_in_flight_ += op.payload_cost;
    Run(id);
  }
  starting_waiting_ = false;
}

void RequestQueue::Run(const std::string& id) {
  Op& op = *ops_.at(id);
  op.running = true;
  if (op.mutation) {
    absl::Status st = record_->MarkRunning(id);
    if (!st.ok()) {
      LogError("cannot record that a mutation starts; not starting it",
               {{"id", id}, {"error", std::string(st.message())}});
      // Recorded before it is answered, like every outcome; when that cannot be written
      // either, the record completes in memory as the next start will complete its `queued`
      // (`unavailable`), so observe says what Core was answered, never `queued` (the 2-hour
      // soak of 2026-12-07, docs/reliability.md finding 7).
      RecordOutcome(op, ErrorOutcome(kUnavailable));
      op.answered = true;
      RespondError(op.conn_token, id, kUnavailable, op.request.operation_name, op.received);
      Finish(id);
      return;
    }
  }
  if (op.request.operation == wire::Operation::kCreate &&
      record_->KilledWithinWindow(op.sandbox_key)) {
    // Ordered after every earlier request of this sandbox, so a kill queued before this
    // create has completed by now. No native call: the sandbox id is spent.
    OnDone(id, ErrorOutcome(kConflict));
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  const absl::Duration remaining = op.deadline - clock_->Monotonic();
  executor_->Execute(op.request, remaining, [this, alive, id](ExecOutcome outcome) {
    if (!alive.expired()) OnDone(id, std::move(outcome));
  });
}

void RequestQueue::OnDone(const std::string& id, ExecOutcome outcome) {
  auto it = ops_.find(id);
  if (it == ops_.end()) return;
  Op& op = *it->second;
  // A mutation's outcome is durable before it is answered: a crash in between leaves no answer
  // (Core observes the id), never an answer that the record contradicts after the restart. An
  // outcome that cannot be recorded (a full state disk) is answered `uncertain`, which is what
  // the record's `running` completes as (docs/reliability.md, "Chaos soak", finding 1).
  if (op.mutation) {
    if (std::optional<std::string> code = RecordOutcome(op, outcome)) {
      outcome = ErrorOutcome(code->c_str());
    }
  }
  if (!op.answered) {
    op.answered = true;
    Respond(op.conn_token, id, outcome, op.request.operation_name, op.received);
  }
  LogInfo("operation finished",
          {{"id", id},
           {"operation", op.request.operation_name},
           {"error_code", outcome.error_code.value_or("none")},
           {"ms", absl::ToInt64Milliseconds(clock_->Monotonic() - op.received)}});
  Finish(id);
}

std::optional<std::string> RequestQueue::RecordOutcome(Op& op, const ExecOutcome& outcome) {
  wire::RecordedResponse r;
  r.id = op.request.id;
  r.result = ToMutationResult(outcome.result);
  r.error_code = outcome.error_code;
  r.create_settled = outcome.create_settled;
  r.unsupported = outcome.unsupported;
  absl::Status st = record_->Complete(op.request.id, std::move(r));
  if (!st.ok()) {
    std::string code = record_->CompleteInMemoryAsRecoverWould(op.request.id);
    LogError("cannot record an operation's outcome; it completes as the next start will",
             {{"id", op.request.id}, {"error", std::string(st.message())}, {"error_code", code}});
    return code;
  }
  return std::nullopt;
}

void RequestQueue::OnBudgetExpired(const std::string& id) {
  auto it = ops_.find(id);
  if (it == ops_.end()) return;
  Op& op = *it->second;
  if (op.answered) return;
  op.answered = true;
  if (!op.running) {
    // Never started: recorded (or completed in memory as the next start would) before it is
    // answered, like every outcome.
    if (op.mutation) RecordOutcome(op, ErrorOutcome(kUnavailable));
    RespondError(op.conn_token, id, kUnavailable, op.request.operation_name, op.received);
    Finish(id);
    return;
  }
  // Started: never cancelled here. privhelper signals the native helper at the same budget's
  // end and answers with the final outcome, which OnDone records (executor.h).
  RespondError(op.conn_token, id, kUncertain, op.request.operation_name, op.received);
}

void RequestQueue::Finish(const std::string& id) {
  auto it = ops_.find(id);
  if (it == ops_.end()) return;
  const std::string key = it->second->sandbox_key;
  // Every end of an operation comes here once: an answer of any kind (OnDone, after the
  // budget's end too), an expiry before the start, a start that failed. Its payload bytes
  // are free from here, and a waiting request no longer waits.
  bool payload_freed = it->second->payload_held;
  if (it->second->payload_held) payload_in_flight_ -= it->second->payload_cost;
  if (it->second->waiting) {
    payload_waiting_.erase(
        std::remove(payload_waiting_.begin(), payload_waiting_.end(), id),
        payload_waiting_.end());
    payload_freed = true;  // the new head may fit
  }
  ops_.erase(it);
  auto q = by_sandbox_.find(key);
  if (q != by_sandbox_.end()) {
    std::deque<std::string>& d = q->second;
    for (auto i = d.begin(); i != d.end(); ++i) {
      if (*i == id) {
        d.erase(i);
        break;
      }
    }
  }
  if (payload_freed) StartWaitingPayloads();
  TryStart(key);
}

ExecOutcome RequestQueue::Observe(const wire::ObserveArgs& args) const {
  wire::ObserveResult r;
  r.operation_id = args.operation_id;
  if (const RecordEntry* e = record_->Find(args.operation_id)) {
    r.operation = e->operation;
    switch (e->state) {
      case RecordState::kQueued: r.state = wire::ObserveState::kQueued; break;
      case RecordState::kRunning: r.state = wire::ObserveState::kRunning; break;
      case RecordState::kCompleted:
        r.state = wire::ObserveState::kCompleted;
        r.response = e->response;
        break;
    }
  }
  ExecOutcome o;
  o.result = wire::Result(std::move(r));
  return o;
}

}  // namespace sn::agent

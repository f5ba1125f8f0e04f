// The request queue's test fixture (spec §4-§5): a simulated clock, a fake executor, a fixed
// generation gate and a real durable record on FaultFs. Shared by request_queue_test (admission,
// order, budgets), request_record_test (the durable record) and payload_bound_test (privhelper's
// admission bound on payload bytes).
#ifndef SANDBOX_NODE_TESTS_AGENT_REQUESTS_REQUEST_QUEUE_FIXTURE_H_
#define SANDBOX_NODE_TESTS_AGENT_REQUESTS_REQUEST_QUEUE_FIXTURE_H_

#include "agent/requests/request_queue.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/atomic_file.h"
#include "common/wire/codec.h"
#include "tests/fakes/fault_fs.h"
#include "gtest/gtest.h"

namespace sn::agent::testing {

inline constexpr char kConn[] = "33333333-3333-4333-8333-333333333333";

inline std::string Uuid(int n) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-0000-4000-8000-%012x", n, n);
  return buf;
}

inline ExecOutcome Success(wire::Result r) {
  ExecOutcome o;
  o.result = std::move(r);
  return o;
}

struct Started {
  wire::Request request;
  absl::Duration remaining;
  std::function<void(ExecOutcome)> done;
  std::string record_state_at_start;
};

class FakeExecutor final : public OperationExecutor {
 public:
  void Execute(const wire::Request& request, absl::Duration remaining,
               std::function<void(ExecOutcome)> done) override {
    auto s = std::make_unique<Started>();
    s->request = request;
    s->remaining = remaining;
    s->done = std::move(done);
    if (on_execute) on_execute(*s);
    started.push_back(std::move(s));
  }
  std::vector<std::unique_ptr<Started>> started;
  std::function<void(Started&)> on_execute;
};

// The queue asks the gate; its own rules are tested with the generation manager
// (tests/agent/generations/manager_test.cc). This one holds generation 7 with image busybox.
class FixedGate final : public GenerationGate {
 public:
  GateAnswer Admit(const wire::Request& r) override {
    if (r.generation != 7) return GateAnswer::kUnconfirmed;
    if (r.operation == wire::Operation::kCreate &&
        std::get<wire::CreateArgs>(r.args).image != "busybox") {
      return GateAnswer::kInvalid;
    }
    return GateAnswer::kRun;
  }
  std::optional<std::string> DigestOf(int64_t) override { return std::nullopt; }
};

class RequestQueueTest : public ::testing::Test {
 protected:
  // The record is on a FaultFs (tests/fakes) that outlives Reset (a restart of the agent).
  RequestQueueTest() {
    dir_ = "/state";
    EXPECT_TRUE(fs_.MakeDirs("state").ok());
    Reset();
  }

  void Reset(size_t node_wide_limit = 64, size_t max_records = kMaxOperationRecords) {
    queue_.reset();
    record_ = std::make_unique<OperationRecord>(dir_ + "/operations", &clock_, max_records, &fs_);
    EXPECT_TRUE(record_->Recover(absl::Hours(48)).ok());
    RequestQueueOptions o;
    o.gate = &gate_;
    o.node_wide_limit = node_wide_limit;
    o.payload_bytes_limit = payload_limit_;
    o.payload_overhead_bytes = payload_overhead_;
    queue_ = std::make_unique<RequestQueue>(o, &clock_, &clock_, record_.get(), &executor_);
    Live();
  }

  // The record of `id` as the journal holds it now (its last line), "" for none.
  std::string OnDisk(const std::string& id) {
    absl::StatusOr<std::vector<RecordEntry>> all =
        ReadOperationRecord(fs_, dir_ + "/operations", nullptr);
    if (!all.ok()) return "";
    for (const RecordEntry& e : *all) {
      if (e.id == id) return EncodeRecordEntry(e);
    }
    return "";
  }
  // Every byte of the journal.
  std::string AllOnDisk() {
    std::string out;
    absl::StatusOr<std::vector<std::string>> names = fs_.Names(dir_ + "/operations");
    for (const std::string& n : names.ok() ? *names : std::vector<std::string>{}) {
      absl::StatusOr<std::string> t = fs_.Contents(dir_ + "/operations/" + n);
      if (t.ok()) out += *t;
    }
    return out;
  }

  void Live(const char* connection_id = kConn) {
    sequence_ = 0;
    queue_->OnLive({connection_id, 5}, [this](std::string s) { sent_.push_back(std::move(s)); });
  }

  wire::Request Req(int id, wire::Operation op, int sandbox = 1, int64_t timeout_ms = 10000) {
    wire::Request r;
    r.id = Uuid(id);
    r.connection_id = kConn;
    r.owner_epoch = 5;
    r.sequence = ++sequence_;
    r.generation = 7;
    r.operation = op;
    r.operation_name = std::string(wire::OperationName(op));
    r.timeout_ms = timeout_ms;
    switch (op) {
      case wire::Operation::kCreate:
        r.args = wire::CreateArgs{Uuid(1000 + sandbox), "busybox", std::nullopt, std::nullopt,
                                  1000, 64 << 20};
        break;
      case wire::Operation::kExec:
        r.args = wire::ExecArgs{Uuid(1000 + sandbox), {"echo", "hi"}, std::nullopt, 1024};
        break;
      case wire::Operation::kObserve:
        r.args = wire::ObserveArgs{Uuid(sandbox)};
        break;
      default:
        r.args = wire::SandboxArgs{Uuid(1000 + sandbox)};
    }
    return r;
  }

  wire::Response Sent(size_t i) {
    EXPECT_LT(i, sent_.size());
    absl::StatusOr<wire::Frame> f = wire::Decode(sent_.at(i), wire::Role::kCore);
    EXPECT_TRUE(f.ok()) << f.status() << sent_.at(i);
    return std::get<wire::Response>(*f);
  }
  std::optional<std::string> LastError() { return Sent(sent_.size() - 1).error_code; }

  // A write_file of `bytes` bytes of content (its payload) to sandbox `sandbox`.
  wire::Request Write(int id, size_t bytes, int sandbox, int64_t timeout_ms = 10000) {
    wire::Request r = Req(id, wire::Operation::kWriteFile, sandbox, timeout_ms);
    r.args = wire::WriteFileArgs{Uuid(1000 + sandbox), "/data/f", std::string(bytes, 'x'), 0600};
    return r;
  }
  // An exec with `bytes` bytes of stdin.
  wire::Request ExecWithStdin(int id, size_t bytes, int sandbox) {
    wire::Request r = Req(id, wire::Operation::kExec, sandbox);
    std::get<wire::ExecArgs>(r.args).stdin_bytes = std::string(bytes, 'i');
    return r;
  }
  // The ids the executor was asked to run, in order.
  std::vector<std::string> StartedIds() const {
    std::vector<std::string> ids;
    for (const auto& s : executor_.started) ids.push_back(s->request.id);
    return ids;
  }
  // The answer sent for `id` (nullopt: none yet).
  std::optional<wire::Response> ResponseFor(int id) {
    for (size_t i = 0; i < sent_.size(); ++i) {
      wire::Response r = Sent(i);
      if (r.id == Uuid(id)) return r;
    }
    return std::nullopt;
  }
  ExecOutcome Written(int64_t size) { return Success(wire::Result(wire::WriteFileResult{size})); }
  // Sends observe request `observe_id` of operation `operation_id` and expects it to report the
  // operation completed with `error_code`.
  void ExpectObservedCompleted(int observe_id, int operation_id, const std::string& error_code) {
    queue_->OnRequest(Req(observe_id, wire::Operation::kObserve, operation_id));
    absl::StatusOr<wire::Result> res =
        wire::DecodeResult(wire::Operation::kObserve, *ResponseFor(observe_id)->raw_result);
    ASSERT_TRUE(res.ok()) << res.status();
    const auto& obs = std::get<wire::ObserveResult>(*res);
    EXPECT_EQ(obs.state, wire::ObserveState::kCompleted);
    ASSERT_TRUE(obs.response.has_value());
    EXPECT_EQ(obs.response->error_code, error_code);
  }

  std::string dir_;
  SimulatedClock clock_;
  FakeExecutor executor_;
  FixedGate gate_;
  fs::FaultFs fs_;
  std::unique_ptr<OperationRecord> record_;
  std::unique_ptr<RequestQueue> queue_;
  std::vector<std::string> sent_;
  int64_t sequence_ = 0;
  size_t payload_limit_ = 0;  // Reset's payload bound (0: none)
  size_t payload_overhead_ = 0;
};

}  // namespace sn::agent::testing

#endif  // SANDBOX_NODE_TESTS_AGENT_REQUESTS_REQUEST_QUEUE_FIXTURE_H_

// PrivhelperExecutor against an in-process gRPC PrivHelper service on a unix socket: outcomes
// map as proto/privhelper.proto documents, the request carries budget and installation, a
// call outlives its budget until privhelper answers (the agent never cancels it), and
// destroying the executor with a call in flight completes that call (no callback after).
#include "agent/requests/privhelper_executor.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {
namespace {

namespace pbv = ::sn::privhelper::v1;

// As the agent runs gRPC (agent/cli/main.cc), set before anything here starts it. The fake
// privhelper's server threads then poll only the server's descriptors, as privhelper's would.
const bool kPollEngine = setenv("GRPC_POLL_STRATEGY", "poll", 1) == 0;
constexpr char kSandbox[] = "0b7e3c1a-5d2f-4e6a-8b9c-0d1e2f3a4b5c";

// What the fake privhelper does with the next Execute.
enum class Behavior { kInspectRunning, kRefuse, kTypedRefusal, kInternalError, kBlock,
                      kBlockThenKilled, kCreateSettled };

class FakePrivhelper final : public pbv::PrivHelper::Service {
 public:
  grpc::Status Execute(grpc::ServerContext* ctx, grpc::ServerReader<pbv::ExecuteMessage>* reader,
                       pbv::ExecuteResponse* resp) override {
    // The stream as privhelper reads it: the request, then its payload in bounded chunks.
    pbv::ExecuteMessage m;
    if (!reader->Read(&m) || !m.has_request()) return grpc::Status::CANCELLED;
    pbv::ExecuteRequest full = m.request();
    size_t chunks = 0, largest = 0;
    std::string payload;
    while (reader->Read(&m)) {
      ++chunks;
      largest = std::max(largest, m.payload().size());
      payload += m.payload();
    }
    if (full.has_write_file()) full.mutable_write_file()->set_content(payload);
    const pbv::ExecuteRequest* req = &full;
    Behavior b;
    {
      absl::MutexLock l(&mu_);
      ++calls_;
      last_ = full;
      chunks_ = chunks;
      largest_chunk_ = largest;
      b = behavior_;
      deadline_left_ = absl::FromChrono(ctx->deadline()) - absl::Now();
    }
    switch (b) {
      case Behavior::kInspectRunning:
        resp->mutable_sandbox()->set_sandbox_id(req->inspect().sandbox_id());
        resp->mutable_sandbox()->set_native_id("c0ffee");
        resp->mutable_sandbox()->set_state(pbv::SANDBOX_STATE_RUNNING);
        return grpc::Status::OK;
      case Behavior::kRefuse:
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "another installation");
      case Behavior::kTypedRefusal:
        resp->set_refusal(pbv::REFUSAL_GENERATION_NOT_HELD);
        resp->set_error_code(pbv::ERROR_CODE_UNCONFIRMED);
        return grpc::Status::OK;
      case Behavior::kInternalError:
        return grpc::Status(grpc::StatusCode::INTERNAL, "lost");
      case Behavior::kBlock:
        entered_.Notify();
        release_.WaitForNotification();
        return grpc::Status(grpc::StatusCode::ABORTED, "released");
      case Behavior::kCreateSettled:
        resp->set_error_code(pbv::ERROR_CODE_FAILED);
        resp->mutable_create_settled()->set_request_id(req->request_id());
        resp->mutable_create_settled()->set_sandbox_id(req->create().sandbox_id());
        resp->mutable_create_settled()->set_native_id("c0ffee");
        resp->mutable_create_settled()->set_generation(req->generation());
        resp->set_native_call_started(true);
        return grpc::Status::OK;
      case Behavior::kBlockThenKilled:
        // As privhelper at budget expiry: it signalled the helper, which reported the final
        // outcome (the kill went through) after the agent's budget had ended.
        entered_.Notify();
        release_.WaitForNotification();
        return grpc::Status::OK;
    }
    return grpc::Status::OK;
  }
  void Set(Behavior b) {
    absl::MutexLock l(&mu_);
    behavior_ = b;
  }
  int calls() {
    absl::MutexLock l(&mu_);
    return calls_;
  }
  pbv::ExecuteRequest last() {
    absl::MutexLock l(&mu_);
    return last_;
  }
  size_t chunks() {
    absl::MutexLock l(&mu_);
    return chunks_;
  }
  size_t largest_chunk() {
    absl::MutexLock l(&mu_);
    return largest_chunk_;
  }
  // What was left of the call's gRPC deadline when privhelper received it.
  absl::Duration deadline_left() {
    absl::MutexLock l(&mu_);
    return deadline_left_;
  }
  absl::Notification entered_, release_;

 private:
  absl::Mutex mu_;
  Behavior behavior_ = Behavior::kInspectRunning;
  pbv::ExecuteRequest last_;
  int calls_ = 0;
  size_t chunks_ = 0;
  size_t largest_chunk_ = 0;
  absl::Duration deadline_left_;
};

class PrivhelperExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kPollEngine);
    char tmpl[] = "/tmp/phx-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    StartServer();
    options_.socket_path = dir_ + "/ph.sock";
    options_.installation_id = "inst-1";
    options_.deadline_grace = absl::Seconds(60);
    options_.digest_of = [](int64_t generation) -> std::optional<std::string> {
      if (generation == 1) return std::string(64, 'a');
      return std::nullopt;
    };
    // The executor runs on an event loop of its own thread, as on the agent's.
    loop_ = std::thread([this] { io_.run(); });
    executor_ = std::make_unique<PrivhelperExecutor>(options_, io_);
  }
  void TearDown() override {
    StopLoop();
    executor_.reset();
    if (!service_.release_.HasBeenNotified()) service_.release_.Notify();
    if (server_ != nullptr) server_->Shutdown();
    std::filesystem::remove_all(dir_);
  }

  // Starts a call on the event loop (Execute's contract).
  void Start(wire::Request r, absl::Duration remaining, std::function<void(ExecOutcome)> done) {
    boost::asio::post(io_, [this, r = std::move(r), remaining, done = std::move(done)]() mutable {
      executor_->Execute(r, remaining, std::move(done));
    });
  }

  // Stops the event loop, after which the executor may be destroyed on this thread.
  void StopLoop() {
    if (!loop_.joinable()) return;
    work_.reset();
    io_.stop();
    loop_.join();
  }

  void StartServer() {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_ + "/ph.sock", grpc::InsecureServerCredentials());
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  static wire::Request Req(wire::Operation op) {
    wire::Request r;
    r.id = "8a1f0c3e-9b2d-4c5e-8f70-112233445566";
    r.generation = 1;
    r.operation = op;
    r.operation_name = std::string(wire::OperationName(op));
    r.timeout_ms = 5000;
    r.args = wire::SandboxArgs{kSandbox};
    return r;
  }

  // Runs one call and waits (bounded) for its completion.
  std::optional<ExecOutcome> Run(wire::Operation op) {
    absl::Notification done;
    std::optional<ExecOutcome> out;
    Start(Req(op), absl::Seconds(5), [&](ExecOutcome o) {
      out = std::move(o);
      done.Notify();
    });
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(30))) return std::nullopt;
    return out;
  }

  std::string dir_;
  PrivhelperExecutorOptions options_;
  FakePrivhelper service_;
  std::unique_ptr<grpc::Server> server_;
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      io_.get_executor()};
  std::thread loop_;
  std::unique_ptr<PrivhelperExecutor> executor_;
};

TEST_F(PrivhelperExecutorTest, ResultIsConvertedAndTheRequestCarriesBudgetAndInstallation) {
  std::optional<ExecOutcome> o = Run(wire::Operation::kInspect);
  ASSERT_TRUE(o.has_value());
  EXPECT_FALSE(o->error_code.has_value());
  ASSERT_TRUE(o->result.has_value());
  const auto* ir = std::get_if<wire::InspectResult>(&*o->result);
  ASSERT_NE(ir, nullptr);
  EXPECT_EQ(ir->state, wire::SandboxState::kRunning);
  EXPECT_EQ(ir->native_id, "c0ffee");
  pbv::ExecuteRequest sent = service_.last();
  EXPECT_EQ(sent.installation_id(), "inst-1");
  EXPECT_EQ(sent.inspect().sandbox_id(), kSandbox);
  EXPECT_GT(sent.budget_ms(), 0);
  EXPECT_LE(sent.budget_ms(), 5000);
}

TEST_F(PrivhelperExecutorTest, APayloadTravelsInBoundedChunksAfterItsRequest) {
  wire::Request r = Req(wire::Operation::kWriteFile);
  std::string content(600 * 1024 + 7, 'c');
  for (size_t i = 0; i < content.size(); i += 4096) content[i] = static_cast<char>('a' + i % 26);
  r.args = wire::WriteFileArgs{kSandbox, "/tmp/f", content, 0644};
  absl::Notification done;
  Start(r, absl::Seconds(5), [&](ExecOutcome) { done.Notify(); });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  pbv::ExecuteRequest sent = service_.last();
  EXPECT_EQ(sent.write_file().content(), content);
  EXPECT_EQ(sent.payload_bytes(), static_cast<int64_t>(content.size()));
  EXPECT_EQ(service_.chunks(), 3u);
  EXPECT_EQ(service_.largest_chunk(), 256u * 1024);
}

TEST_F(PrivhelperExecutorTest, RefusalBeforeWorkIsUnavailableEvenForAMutation) {
  service_.Set(Behavior::kRefuse);
  std::optional<ExecOutcome> o = Run(wire::Operation::kKill);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->error_code, "unavailable");
}

TEST_F(PrivhelperExecutorTest, AnyOtherFailureIsUncertainForAMutationAndUnavailableForARead) {
  service_.Set(Behavior::kInternalError);
  std::optional<ExecOutcome> kill = Run(wire::Operation::kKill);
  ASSERT_TRUE(kill.has_value());
  EXPECT_EQ(kill->error_code, "uncertain");
  std::optional<ExecOutcome> inspect = Run(wire::Operation::kInspect);
  ASSERT_TRUE(inspect.has_value());
  EXPECT_EQ(inspect->error_code, "unavailable");
}

TEST_F(PrivhelperExecutorTest, TypedRefusalAnswersItsErrorCode) {
  service_.Set(Behavior::kTypedRefusal);
  std::optional<ExecOutcome> o = Run(wire::Operation::kKill);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->error_code, "unconfirmed");
}

// executor.h: the agent never cancels a started call at its budget. privhelper anchors the
// same budget, signals the native helper and answers with the final outcome, which must reach
// the queue (it records it for observe); only the remaining budget plus the grace bounds it.
TEST_F(PrivhelperExecutorTest, CallOutlivesItsBudgetAndDeliversPrivhelpersFinalOutcome) {
  service_.Set(Behavior::kBlockThenKilled);
  absl::Notification done;
  std::optional<ExecOutcome> out;
  Start(Req(wire::Operation::kKill), absl::Milliseconds(1), [&](ExecOutcome o) {
    out = std::move(o);
    done.Notify();
  });
  ASSERT_TRUE(service_.entered_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // privhelper got the budget to anchor, and a deadline far beyond it: the budget + grace.
  EXPECT_EQ(service_.last().budget_ms(), 1);
  EXPECT_GT(service_.deadline_left(), absl::Seconds(30));
  // (gRPC rounds the timeout it sends up, to a coarser unit.)
  EXPECT_LE(service_.deadline_left(), options_.deadline_grace + absl::Seconds(1));
  EXPECT_FALSE(done.HasBeenNotified());  // past its 1 ms budget, still waiting for the answer
  service_.release_.Notify();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(out.has_value());
  EXPECT_FALSE(out->error_code.has_value()) << *out->error_code;  // the kill's real outcome
}

TEST_F(PrivhelperExecutorTest, ACreateSettledReceiptCarriesItsGenerationsDigest) {
  service_.Set(Behavior::kCreateSettled);
  for (int64_t generation : {1, 2}) {
    wire::Request r = Req(wire::Operation::kCreate);
    r.generation = generation;
    r.args = wire::CreateArgs{kSandbox, "busybox", std::nullopt, std::nullopt, 100, 64 << 20};
    absl::Notification done;
    std::optional<ExecOutcome> o;
    Start(r, absl::Seconds(5), [&](ExecOutcome out) {
      o = std::move(out);
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    EXPECT_EQ(o->error_code, std::optional<std::string>("failed"));
    if (generation == 1) {
      ASSERT_TRUE(o->create_settled.has_value());
      EXPECT_EQ(o->create_settled->specification_digest, std::string(64, 'a'));
      EXPECT_EQ(o->create_settled->generation, 1);
    } else {
      // No digest known for the generation: no receipt (Core treats it as unconfirmed).
      EXPECT_FALSE(o->create_settled.has_value());
    }
  }
}

TEST_F(PrivhelperExecutorTest, DestroyingTheExecutorCompletesACallInFlight) {
  service_.Set(Behavior::kBlock);
  std::optional<ExecOutcome> out;
  int callbacks = 0;
  Start(Req(wire::Operation::kKill), absl::Seconds(5), [&](ExecOutcome o) {
    out = std::move(o);
    ++callbacks;
  });
  ASSERT_TRUE(service_.entered_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  StopLoop();
  executor_.reset();  // cancels the call and takes its completion
  EXPECT_EQ(callbacks, 1);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->error_code, "uncertain");  // a kill that reached privhelper: fate unknown
}

// The executor connects privhelper's socket itself; when privhelper is gone, a call is
// unavailable at once (nothing was sent), for a mutation too, and nothing waits.
TEST_F(PrivhelperExecutorTest, NoPrivhelperIsUnavailableAtOnce) {
  server_->Shutdown();
  server_.reset();
  std::filesystem::remove(dir_ + "/ph.sock");
  std::optional<ExecOutcome> kill = Run(wire::Operation::kKill);
  ASSERT_TRUE(kill.has_value());
  EXPECT_EQ(kill->error_code, "unavailable");
  EXPECT_EQ(service_.calls(), 0);
}

// privhelper restarting (a new socket at the same path): the old connection's hang-up is seen,
// and the calls after it go to the new privhelper. A call caught on the old connection may
// fail (unavailable for an inspect); never more than that one, and none hangs.
TEST_F(PrivhelperExecutorTest, APrivhelperRestartIsFollowedByANewConnection) {
  ASSERT_EQ(Run(wire::Operation::kInspect)->error_code, std::nullopt);
  server_->Shutdown();
  server_.reset();
  std::filesystem::remove(dir_ + "/ph.sock");
  StartServer();
  int failed = 0;
  for (int i = 0; i < 3; ++i) {
    std::optional<ExecOutcome> o = Run(wire::Operation::kInspect);
    ASSERT_TRUE(o.has_value()) << i;
    if (o->error_code.has_value()) {
      EXPECT_EQ(o->error_code, "unavailable") << i;
      ++failed;
    }
  }
  EXPECT_LE(failed, 1);
  EXPECT_EQ(Run(wire::Operation::kInspect)->error_code, std::nullopt);
}

// A call privhelper never answers ends at its gRPC deadline (the remaining budget plus the
// grace): gRPC's timer ends it and the executor's own poll at that time takes the completion.
TEST_F(PrivhelperExecutorTest, ACallPrivhelperNeverAnswersEndsAtItsDeadline) {
  StopLoop();
  executor_.reset();
  options_.deadline_grace = absl::Milliseconds(300);
  io_.restart();
  work_.emplace(io_.get_executor());
  loop_ = std::thread([this] { io_.run(); });
  executor_ = std::make_unique<PrivhelperExecutor>(options_, io_);
  service_.Set(Behavior::kBlock);
  absl::Notification done;
  std::optional<ExecOutcome> out;
  const absl::Time start = absl::Now();
  Start(Req(wire::Operation::kKill), absl::Milliseconds(100), [&](ExecOutcome o) {
    out = std::move(o);
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(350));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->error_code, "uncertain");  // a kill that reached privhelper: fate unknown
}

// Many calls at once, on one connection, each get their own answer.
TEST_F(PrivhelperExecutorTest, ManyCallsAtOnceEachGetTheirAnswer) {
  constexpr int kCalls = 64;
  absl::Mutex mu;
  int ok = 0, answered = 0;
  for (int i = 0; i < kCalls; ++i) {
    Start(Req(wire::Operation::kInspect), absl::Seconds(5), [&](ExecOutcome o) {
      absl::MutexLock l(&mu);
      ++answered;
      if (!o.error_code.has_value()) ++ok;
    });
  }
  absl::MutexLock l(&mu);
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                      +[](int* n) { return *n == kCalls; }, &answered),
                                  absl::Seconds(30)));
  EXPECT_EQ(ok, kCalls);
}

}  // namespace
}  // namespace sn::agent

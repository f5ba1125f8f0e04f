#include "agent/privhelper_executor.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "agent/privhelper_convert.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {
namespace {

ExecOutcome Error(const char* code) {
  ExecOutcome o;
  o.error_code = code;
  return o;
}

// One call's state; owned by Impl::inflight_ until its completion is taken from the queue.
struct Call {
  grpc::ClientContext ctx;
  pb::ExecuteRequest req;
  pb::ExecuteResponse resp;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::ExecuteResponse>> reader;
  std::function<void(const grpc::Status&)> on_done;  // runs on the completion thread
};

}  // namespace

class PrivhelperExecutor::Impl {
 public:
  Impl(PrivhelperExecutorOptions options, std::function<void(std::function<void()>)> post)
      : options_(std::move(options)),
        post_(std::move(post)),
        channel_(grpc::CreateChannel(absl::StrCat("unix:", options_.socket_path),
                                     grpc::InsecureChannelCredentials())),
        stub_(pb::PrivHelper::NewStub(channel_)),
        completions_([this] { Complete(); }) {}

  // Cancels the calls in flight, lets their completions run, then stops the completion thread,
  // so no completion runs after this.
  ~Impl() {
    {
      absl::MutexLock l(&mu_);
      for (const auto& [tag, call] : inflight_) call->ctx.TryCancel();
      mu_.Await(absl::Condition(
          +[](std::map<void*, std::shared_ptr<Call>>* m) { return m->empty(); }, &inflight_));
    }
    cq_.Shutdown();
    completions_.join();
  }

  void Execute(const wire::Request& request, absl::Duration remaining,
               std::function<void(ExecOutcome)> done);

 private:
  // The completion thread: one thread takes every finished call from the queue (it also does
  // the gRPC reads while it waits), hands the outcome to the event loop through `post_`.
  void Complete() {
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
      std::shared_ptr<Call> call;
      {
        absl::MutexLock l(&mu_);
        auto it = inflight_.find(tag);
        if (it == inflight_.end()) continue;
        call = it->second;
      }
      // Finish always completes with ok == true for a unary call; the status says the rest.
      call->on_done(call->status);
      absl::MutexLock l(&mu_);
      inflight_.erase(tag);
    }
  }

  absl::Mutex mu_;
  std::map<void*, std::shared_ptr<Call>> inflight_ ABSL_GUARDED_BY(mu_);
  PrivhelperExecutorOptions options_;
  std::function<void(std::function<void()>)> post_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::PrivHelper::Stub> stub_;
  grpc::CompletionQueue cq_;
  std::thread completions_;  // last: started after everything it uses
};


void PrivhelperExecutor::Impl::Execute(const wire::Request& request, absl::Duration remaining,
                                       std::function<void(ExecOutcome)> done) {
  auto call = std::make_shared<Call>();
  if (!ToProto(request, &call->req)) {
    LogError("an operation privhelper does not run reached the executor", {{"id", request.id}});
    post_([done = std::move(done)] { done(Error("unavailable")); });
    return;
  }
  if (remaining < absl::Milliseconds(1)) remaining = absl::Milliseconds(1);
  call->req.set_budget_ms(absl::ToInt64Milliseconds(remaining));
  call->req.set_installation_id(options_.installation_id);
  call->ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(absl::ToInt64Milliseconds(
                             remaining + options_.deadline_grace)));
  const bool mutation = wire::IsMutationRequest(request.operation, request.args);
  call->on_done = [call_ptr = call.get(), request, mutation,
                   digest = options_.specification_digest, post = post_,
                   done = std::move(done)](const grpc::Status& st) mutable {
    ExecOutcome outcome;
    if (st.ok()) {
      const pb::ExecuteResponse& resp = call_ptr->resp;
      if (resp.refusal() != pb::REFUSAL_NONE) {
        // privhelper answered itself before any native I/O; error_code says what to answer.
        LogWarning("privhelper refused the call",
                   {{"id", request.id},
                    {"refusal", pb::Refusal_Name(resp.refusal())},
                    {"error_code", pb::ErrorCode_Name(resp.error_code())}});
      }
      outcome = FromProto(request, resp, digest);
    } else {
      // Non-OK statuses that only come before any work is done (the peer check; a method or
      // message privhelper does not serve): nothing started. Anything else — a transport loss
      // (UNAVAILABLE may come after the request was sent), cancellation, deadline — leaves a
      // mutation's fate unknown.
      const bool not_reached = st.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
                               st.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                               st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                               st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                               st.error_code() == grpc::StatusCode::UNIMPLEMENTED;
      outcome = Error(mutation && !not_reached ? "uncertain" : "unavailable");
      LogWarning("privhelper Execute failed",
                 {{"id", request.id},
                  {"grpc_code", static_cast<int>(st.error_code())},
                  {"error", st.error_message()}});
    }
    post([done = std::move(done), outcome = std::move(outcome)]() mutable {
      done(std::move(outcome));
    });
  };
  call->reader = stub_->PrepareAsyncExecute(&call->ctx, call->req, &cq_);
  {
    absl::MutexLock l(&mu_);
    inflight_.emplace(call.get(), call);
  }
  call->reader->StartCall();
  call->reader->Finish(&call->resp, &call->status, call.get());
}

PrivhelperExecutor::PrivhelperExecutor(PrivhelperExecutorOptions options,
                                       std::function<void(std::function<void()>)> post)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(post))) {}
PrivhelperExecutor::~PrivhelperExecutor() = default;

void PrivhelperExecutor::Execute(const wire::Request& request, absl::Duration remaining_budget,
                                 std::function<void(ExecOutcome)> done) {
  impl_->Execute(request, remaining_budget, std::move(done));
}

}  // namespace sn::agent

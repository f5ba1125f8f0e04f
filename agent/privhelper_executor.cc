#include "agent/privhelper_executor.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "agent/privhelper_convert.h"
#include "proto/execute_stream.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {
namespace {

using privhelper::kMaxPayloadChunkBytes;

ExecOutcome Error(const char* code) {
  ExecOutcome o;
  o.error_code = code;
  return o;
}

// One call's state; owned by Impl::inflight_ until its last completion is taken from the queue.
// The Execute stream (proto/privhelper.proto, ExecuteMessage) carries the request, then its
// payload in chunks.
// - Without a payload (inspect, kill, most operations) the stream is one message and its
//   half-close, which on the wire is exactly a unary call: it is made as one, through a generic
//   stub on the same method, so that the initial metadata, the message, the half-close and the
//   receipt of the answer are one batch with one tag. Nothing completes until privhelper
//   answers, so the completion thread is woken once per call, not also for the write.
// - With a payload, the last message half-closes the stream in the same batch (WriteLast), and
//   the initial metadata is corked into the first write; Finish is started at once, beside the
//   writes. Two tags: one for the write in flight, one for Finish.
struct Call {
  struct Tag {
    Call* call;
    bool finish;
  };
  grpc::ClientContext ctx;
  pb::ExecuteRequest req;
  std::string payload;  // moved out of the request; sent in chunks
  size_t sent = 0;      // payload bytes written so far
  pb::ExecuteResponse resp;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncWriter<pb::ExecuteMessage>> writer;    // with a payload
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::ExecuteResponse>> unary;  // without
  std::function<void(const grpc::Status&)> on_done;  // runs on the completion thread
  Tag write_tag{this, false};
  Tag finish_tag{this, true};
  bool writing = false;   // write_tag is in the queue's hands
  bool finished = false;  // finish_tag came back: `status` is final

  // REQUIRES: ctx has its deadline; `unary` was prepared, or ctx has corked initial metadata
  // and `writer` was prepared.
  void Start() {
    if (unary != nullptr) {
      unary->StartCall();  // no batch yet: Finish sends and receives in one
      unary->Finish(&resp, &status, &finish_tag);
      return;
    }
    writer->StartCall(nullptr);  // corked: no batch and no tag of its own
    pb::ExecuteMessage m;
    *m.mutable_request() = std::move(req);
    Write(m);
    writer->Finish(&status, &finish_tag);
  }

  // Takes one completion; true when the call is over (Finish and any write came back).
  bool Complete(const Tag* tag, bool ok) {
    if (tag->finish) {
      finished = true;
    } else {
      writing = false;
      // A failed write means the stream ended (privhelper answered already, or the transport
      // failed): Finish tells which.
      if (ok && sent < payload.size()) {
        pb::ExecuteMessage m;
        const size_t n = std::min(kMaxPayloadChunkBytes, payload.size() - sent);
        m.set_payload(payload.substr(sent, n));
        sent += n;
        Write(m);
      }
    }
    return finished && !writing;
  }

 private:
  void Write(const pb::ExecuteMessage& m) {
    writing = true;
    grpc::WriteOptions options;
    if (sent >= payload.size()) options.set_last_message();  // half-closes in the same batch
    writer->Write(m, options, &write_tag);
  }
};
}  // namespace

// privhelper's channel: responses may carry a whole read_file result.
static std::shared_ptr<grpc::Channel> NewChannel(const std::string& socket_path) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(privhelper::kMaxResponseMessageBytes));
  args.SetMaxSendMessageSize(static_cast<int>(privhelper::kMaxRequestMessageBytes));
  return grpc::CreateCustomChannel(absl::StrCat("unix:", socket_path),
                                   grpc::InsecureChannelCredentials(), args);
}

class PrivhelperExecutor::Impl {
 public:
  Impl(PrivhelperExecutorOptions options, std::function<void(std::function<void()>)> post)
      : options_(std::move(options)),
        post_(std::move(post)),
        channel_(NewChannel(options_.socket_path)),
        stub_(pb::PrivHelper::NewStub(channel_)),
        generic_(channel_),
        completions_([this] { Complete(); }) {}

  // Cancels the calls in flight, lets their completions run, then stops the completion thread,
  // so no completion runs after this.
  ~Impl() {
    {
      absl::MutexLock l(&mu_);
      for (const auto& [key, call] : inflight_) call->ctx.TryCancel();
      mu_.Await(absl::Condition(
          +[](std::map<Call*, std::shared_ptr<Call>>* m) { return m->empty(); }, &inflight_));
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
      const auto* t = static_cast<const Call::Tag*>(tag);
      std::shared_ptr<Call> call;
      {
        absl::MutexLock l(&mu_);
        auto it = inflight_.find(t->call);
        if (it == inflight_.end()) continue;
        call = it->second;
      }
      if (!call->Complete(t, ok)) continue;
      call->on_done(call->status);
      absl::MutexLock l(&mu_);
      inflight_.erase(call.get());
    }
  }

  absl::Mutex mu_;
  std::map<Call*, std::shared_ptr<Call>> inflight_ ABSL_GUARDED_BY(mu_);
  PrivhelperExecutorOptions options_;
  std::function<void(std::function<void()>)> post_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::PrivHelper::Stub> stub_;
  // Execute without a payload, as the unary call it is on the wire (Call).
  grpc::TemplatedGenericStub<pb::ExecuteMessage, pb::ExecuteResponse> generic_;
  const std::string execute_method_ =
      absl::StrCat("/", pb::PrivHelper::service_full_name(), "/Execute");
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
  call->payload = privhelper::TakePayload(&call->req);
  call->ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(absl::ToInt64Milliseconds(
                             remaining + options_.deadline_grace)));
  const bool mutation = wire::IsMutationRequest(request.operation, request.args);
  call->on_done = [call_ptr = call.get(), request = WithoutPayload(request), mutation,
                   digest = options_.digest_of ? options_.digest_of(request.generation)
                                                   .value_or(std::string())
                                               : std::string(),
                   post = post_,
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
  if (call->payload.empty()) {
    pb::ExecuteMessage m;
    *m.mutable_request() = std::move(call->req);
    call->unary = generic_.PrepareUnaryCall(&call->ctx, execute_method_, m, &cq_);
  } else {
    call->ctx.set_initial_metadata_corked(true);
    call->writer = stub_->PrepareAsyncExecute(&call->ctx, &call->resp, &cq_);
  }
  {
    absl::MutexLock l(&mu_);
    inflight_.emplace(call.get(), call);
  }
  call->Start();
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

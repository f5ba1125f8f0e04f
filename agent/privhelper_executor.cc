#include "agent/privhelper_executor.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {
namespace {

namespace pb = ::sn::privhelper::v1;

const char* ErrorCodeName(pb::ErrorCode c) {
  switch (c) {
    case pb::ERROR_CODE_INVALID: return "invalid";
    case pb::ERROR_CODE_UNSUPPORTED: return "unsupported";
    case pb::ERROR_CODE_CAPACITY: return "capacity";
    case pb::ERROR_CODE_CONFLICT: return "conflict";
    case pb::ERROR_CODE_NOT_FOUND: return "not_found";
    case pb::ERROR_CODE_FAILED: return "failed";
    case pb::ERROR_CODE_UNCONFIRMED: return "unconfirmed";
    case pb::ERROR_CODE_UNAVAILABLE: return "unavailable";
    case pb::ERROR_CODE_UNCERTAIN: return "uncertain";
    default: return nullptr;
  }
}

ExecOutcome Error(const char* code) {
  ExecOutcome o;
  o.error_code = code;
  return o;
}

std::optional<wire::SandboxState> StateOf(pb::SandboxState s) {
  switch (s) {
    case pb::SANDBOX_STATE_RUNNING: return wire::SandboxState::kRunning;
    case pb::SANDBOX_STATE_RETAINED: return wire::SandboxState::kRetained;
    case pb::SANDBOX_STATE_ABSENT: return wire::SandboxState::kAbsent;
    default: return std::nullopt;
  }
}

// Fills `out` from the wire request. False when create names an image without a native
// reference (the request queue checks image names first, so this is a configuration fault).
bool ToProto(const wire::Request& r, const PrivhelperExecutorOptions& opt,
             pb::ExecuteRequest* out) {
  out->set_request_id(r.id);
  out->set_generation(r.generation);
  out->mutable_limits()->set_max_active(opt.max_active);
  out->mutable_limits()->set_max_retained(opt.max_retained);
  switch (r.operation) {
    case wire::Operation::kCreate: {
      const auto& a = std::get<wire::CreateArgs>(r.args);
      auto it = opt.native_images.find(a.image);
      if (it == opt.native_images.end()) return false;
      pb::CreateArgs* c = out->mutable_create();
      c->set_sandbox_id(a.sandbox_id);
      c->set_image(it->second);
      if (a.command) {
        for (const std::string& s : *a.command) c->add_command(s);
      }
      if (a.env) {
        for (const auto& [k, v] : *a.env) (*c->mutable_env())[k] = v;
      }
      c->set_cpu_millis(a.cpu_millis);
      c->set_memory_bytes(a.memory_bytes);
      return true;
    }
    case wire::Operation::kResume: {
      const auto& a = std::get<wire::ResumeArgs>(r.args);
      out->mutable_resume()->set_sandbox_id(a.sandbox_id);
      out->mutable_resume()->set_reconciliation_only(a.reconciliation_only);
      return true;
    }
    case wire::Operation::kKill:
      out->mutable_kill()->set_sandbox_id(std::get<wire::SandboxArgs>(r.args).sandbox_id);
      return true;
    case wire::Operation::kKillCompute:
      out->mutable_kill_compute()->set_sandbox_id(
          std::get<wire::SandboxArgs>(r.args).sandbox_id);
      return true;
    case wire::Operation::kDeleteRetained:
      out->mutable_delete_retained()->set_sandbox_id(
          std::get<wire::SandboxArgs>(r.args).sandbox_id);
      return true;
    case wire::Operation::kInspect:
      out->mutable_inspect()->set_sandbox_id(std::get<wire::SandboxArgs>(r.args).sandbox_id);
      return true;
    case wire::Operation::kExec: {
      const auto& a = std::get<wire::ExecArgs>(r.args);
      pb::ExecArgs* e = out->mutable_exec();
      e->set_sandbox_id(a.sandbox_id);
      for (const std::string& s : a.argv) e->add_argv(s);
      if (a.stdin_bytes) e->set_stdin(*a.stdin_bytes);
      e->set_output_limit_bytes(a.output_limit_bytes);
      return true;
    }
    case wire::Operation::kWriteFile: {
      const auto& a = std::get<wire::WriteFileArgs>(r.args);
      pb::WriteFileArgs* w = out->mutable_write_file();
      w->set_sandbox_id(a.sandbox_id);
      w->set_path(a.path);
      w->set_content(a.content);
      w->set_mode(a.mode);
      return true;
    }
    case wire::Operation::kReadFile: {
      const auto& a = std::get<wire::ReadFileArgs>(r.args);
      pb::ReadFileArgs* rf = out->mutable_read_file();
      rf->set_sandbox_id(a.sandbox_id);
      rf->set_path(a.path);
      rf->set_max_bytes(a.max_bytes);
      return true;
    }
    case wire::Operation::kObserve:
      return false;
  }
  return false;
}

// Converts privhelper's answer into the wire outcome. Malformed evidence never becomes a
// success: a mutation answers uncertain, a read unavailable.
ExecOutcome FromProto(const wire::Request& r, const pb::ExecuteResponse& resp,
                      const std::string& digest) {
  const bool mutation = wire::IsMutationRequest(r.operation, r.args);
  const ExecOutcome malformed = Error(mutation ? "uncertain" : "unavailable");
  if (resp.error_code() != pb::ERROR_CODE_NONE) {
    const char* code = ErrorCodeName(resp.error_code());
    if (code == nullptr) return malformed;
    ExecOutcome o = Error(code);
    if (resp.error_code() == pb::ERROR_CODE_FAILED && resp.has_create_settled() &&
        r.operation == wire::Operation::kCreate) {
      const pb::CreateSettled& s = resp.create_settled();
      o.create_settled = wire::CreateSettled{s.request_id(), s.sandbox_id(), s.native_id(),
                                             s.generation(), digest};
    }
    if (resp.error_code() == pb::ERROR_CODE_UNSUPPORTED && resp.has_unsupported()) {
      o.unsupported = wire::Unsupported{resp.unsupported().operation(),
                                        resp.unsupported().reason()};
    }
    return o;
  }
  ExecOutcome o;
  const std::string sandbox_id = SandboxOf(r.args);
  switch (r.operation) {
    case wire::Operation::kCreate:
    case wire::Operation::kResume:
    case wire::Operation::kInspect: {
      if (!resp.has_sandbox()) return malformed;
      std::optional<wire::SandboxState> st = StateOf(resp.sandbox().state());
      if (!st) return malformed;
      const std::string& native = resp.sandbox().native_id();
      if (r.operation == wire::Operation::kCreate) {
        if (*st != wire::SandboxState::kRunning || native.empty()) return malformed;
        o.result = wire::CreateResult{sandbox_id, native};
      } else if (r.operation == wire::Operation::kResume) {
        if (*st == wire::SandboxState::kAbsent || native.empty()) return malformed;
        o.result = wire::ResumeResult{sandbox_id, native, *st};
      } else {
        if ((*st == wire::SandboxState::kAbsent) != native.empty()) return malformed;
        wire::InspectResult ir{sandbox_id, *st, std::nullopt};
        if (!native.empty()) ir.native_id = native;
        o.result = ir;
      }
      return o;
    }
    case wire::Operation::kExec:
      if (!resp.has_exec()) return malformed;
      o.result = wire::ExecResult{resp.exec().exit_code(), resp.exec().stdout(),
                                  resp.exec().stderr(), resp.exec().truncated()};
      return o;
    case wire::Operation::kWriteFile:
      if (!resp.has_write_file()) return malformed;
      o.result = wire::WriteFileResult{resp.write_file().size()};
      return o;
    case wire::Operation::kReadFile:
      if (!resp.has_read_file()) return malformed;
      o.result = wire::ReadFileResult{resp.read_file().content(), resp.read_file().size(),
                                      resp.read_file().truncated()};
      return o;
    case wire::Operation::kKill:
    case wire::Operation::kKillCompute:
    case wire::Operation::kDeleteRetained:
      return o;
    case wire::Operation::kObserve:
      return malformed;
  }
  return malformed;
}

}  // namespace

namespace {

// One call's state; kept alive by the gRPC callback until it completes.
struct Call {
  grpc::ClientContext ctx;
  pb::ExecuteRequest req;
  pb::ExecuteResponse resp;
};

class GrpcExecution final : public Execution {
 public:
  explicit GrpcExecution(std::shared_ptr<Call> call) : call_(std::move(call)) {}
  void Cancel() override { call_->ctx.TryCancel(); }

 private:
  std::shared_ptr<Call> call_;
};

}  // namespace

class PrivhelperExecutor::Impl {
 public:
  Impl(PrivhelperExecutorOptions options, std::function<void(std::function<void()>)> post)
      : options_(std::move(options)),
        post_(std::move(post)),
        channel_(grpc::CreateChannel(absl::StrCat("unix:", options_.socket_path),
                                     grpc::InsecureChannelCredentials())),
        stub_(pb::PrivHelper::NewStub(channel_)) {}

  // Cancels the calls in flight and waits for their callbacks, so none runs after this.
  ~Impl() {
    absl::MutexLock l(&mu_);
    for (const auto& call : inflight_) call->ctx.TryCancel();
    mu_.Await(absl::Condition(
        +[](std::set<std::shared_ptr<Call>>* s) { return s->empty(); }, &inflight_));
  }

  std::unique_ptr<Execution> Execute(const wire::Request& request, absl::Duration remaining,
                                     std::function<void(ExecOutcome)> done);

 private:
  absl::Mutex mu_;
  std::set<std::shared_ptr<Call>> inflight_ ABSL_GUARDED_BY(mu_);
  PrivhelperExecutorOptions options_;
  std::function<void(std::function<void()>)> post_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::PrivHelper::Stub> stub_;
};


std::unique_ptr<Execution> PrivhelperExecutor::Impl::Execute(
    const wire::Request& request, absl::Duration remaining,
    std::function<void(ExecOutcome)> done) {
  auto call = std::make_shared<Call>();
  if (!ToProto(request, options_, &call->req)) {
    LogError("no native image reference for the request's image", {{"id", request.id}});
    post_([done = std::move(done)] { done(Error("unavailable")); });
    return std::make_unique<GrpcExecution>(call);
  }
  if (remaining < absl::Milliseconds(1)) remaining = absl::Milliseconds(1);
  call->req.set_budget_ms(absl::ToInt64Milliseconds(remaining));
  call->ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(absl::ToInt64Milliseconds(
                             remaining + options_.deadline_grace)));
  const bool mutation = wire::IsMutationRequest(request.operation, request.args);
  {
    absl::MutexLock l(&mu_);
    inflight_.insert(call);
  }
  stub_->async()->Execute(
      &call->ctx, &call->req, &call->resp,
      [this, call, request, mutation, digest = options_.specification_digest, post = post_,
       done = std::move(done)](grpc::Status st) mutable {
        ExecOutcome outcome;
        if (st.ok()) {
          outcome = FromProto(request, call->resp, digest);
        } else {
          // Did not reach a helper: nothing started. Cancelled or timed out: a mutation may
          // have started.
          const bool not_reached = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
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
        absl::MutexLock l(&mu_);
        inflight_.erase(call);
      });
  return std::make_unique<GrpcExecution>(std::move(call));
}

PrivhelperExecutor::PrivhelperExecutor(PrivhelperExecutorOptions options,
                                       std::function<void(std::function<void()>)> post)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(post))) {}
PrivhelperExecutor::~PrivhelperExecutor() = default;

std::unique_ptr<Execution> PrivhelperExecutor::Execute(const wire::Request& request,
                                                       absl::Duration remaining_budget,
                                                       std::function<void(ExecOutcome)> done) {
  return impl_->Execute(request, remaining_budget, std::move(done));
}

}  // namespace sn::agent

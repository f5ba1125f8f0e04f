#include "agent/generations/privhelper_retirement.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/privhelper_rpc/channel.h"
#include "agent/privhelper_rpc/privhelper_client.h"
#include "agent/privhelper_rpc/serial_worker.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {

namespace pb = ::sn::privhelper::v1;

namespace {

std::optional<HeldState> StateOf(pb::GenerationState s) { return HeldStateFromProto(s); }

CollectResult FromProto(const pb::CollectGenerationResult& r) {
  CollectResult out;
  switch (r.outcome()) {
    case pb::COLLECT_OUTCOME_DROPPED: out.outcome = CollectOutcome::kDropped; break;
    case pb::COLLECT_OUTCOME_HELD: out.outcome = CollectOutcome::kHeld; break;
    case pb::COLLECT_OUTCOME_REFUSED: out.outcome = CollectOutcome::kRefused; break;
    case pb::COLLECT_OUTCOME_UNKNOWN: out.outcome = CollectOutcome::kUnknown; break;
    default: out.outcome = CollectOutcome::kFailed; break;
  }
  if (out.outcome == CollectOutcome::kRefused) {
    out.diagnostic = DiagnosticFromProto(static_cast<int>(r.diagnostic()));
  }
  out.reason = r.reason();
  out.state = StateOf(r.state());
  // A DROPPED answer that names another state afterwards is not believed.
  if (out.outcome == CollectOutcome::kDropped && out.state != HeldState::kDropped) {
    out.outcome = CollectOutcome::kFailed;
    out.reason = "privhelper answered dropped with another state";
  }
  return out;
}

// One call's cancellation, shared by the handle (event loop) and the worker.
struct CallState {
  absl::Mutex mu;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  grpc::ClientContext* ctx ABSL_GUARDED_BY(mu) = nullptr;
  void Cancel() {
    absl::MutexLock l(&mu);
    cancelled = true;
    if (ctx != nullptr) ctx->TryCancel();
  }
};

class Handle final : public CollectCall {
 public:
  explicit Handle(std::shared_ptr<CallState> s) : s_(std::move(s)) {}
  void Cancel() override { s_->Cancel(); }

 private:
  std::shared_ptr<CallState> s_;
};

}  // namespace

class GrpcGenerationCollector::Impl {
 public:
  Impl(std::string socket_path, std::function<void(std::function<void()>)> post,
       absl::Duration deadline)
      : stub_(PrivhelperStub(socket_path)),
        post_(std::move(post)),
        deadline_(deadline) {}

  ~Impl() {
    {
      absl::MutexLock l(&mu_);
      stopping_ = true;
      for (const std::weak_ptr<CallState>& w : calls_) {
        if (std::shared_ptr<CallState> c = w.lock()) c->Cancel();
      }
    }
    worker_.reset();  // drops the calls not started, waits for the one running
  }

  std::unique_ptr<CollectCall> Collect(const GenerationRef& ref,
                                       std::function<void(CollectResult)> done) {
    auto state = std::make_shared<CallState>();
    {
      absl::MutexLock l(&mu_);
      calls_.erase(std::remove_if(calls_.begin(), calls_.end(),
                                  [](const std::weak_ptr<CallState>& w) { return w.expired(); }),
                   calls_.end());
      calls_.push_back(state);
    }
    worker_->Run([this, ref, state, done = std::move(done)]() mutable {
      CollectResult result = Run(ref, *state);
      {
        absl::MutexLock l(&mu_);
        if (stopping_) return;  // nothing is posted once the owner is going away
      }
      post_([done = std::move(done), result = std::move(result)]() mutable {
        done(std::move(result));
      });
    });
    return std::make_unique<Handle>(std::move(state));
  }

 private:
  CollectResult Run(const GenerationRef& ref, CallState& state) {
    grpc::ClientContext ctx;
    SetCallDeadline(&ctx, deadline_);
    {
      absl::MutexLock l(&state.mu);
      if (state.cancelled) {
        CollectResult r;
        r.outcome = CollectOutcome::kHeld;
        r.reason = "the granting connection ended before the call";
        return r;
      }
      state.ctx = &ctx;
    }
    pb::CollectGenerationRequest req;
    req.set_generation(ref.generation);
    req.set_specification_digest(ref.specification_digest);
    pb::CollectGenerationResult resp;
    grpc::Status st = stub_->CollectGeneration(&ctx, req, &resp);
    {
      absl::MutexLock l(&state.mu);
      state.ctx = nullptr;
    }
    if (st.ok()) return FromProto(resp);
    CollectResult r;
    if (st.error_code() == grpc::StatusCode::CANCELLED) {
      // privhelper refuses a caller that left before its point of no return; past it, the
      // journal finishes. Either way the next probe says which.
      r.outcome = CollectOutcome::kHeld;
      r.reason = "the granting connection ended during the call";
    } else {
      r.outcome = CollectOutcome::kFailed;
      r.reason = CallError("CollectGeneration", st);
    }
    return r;
  }

  std::unique_ptr<pb::PrivHelper::Stub> stub_;
  std::function<void(std::function<void()>)> post_;
  absl::Duration deadline_;
  absl::Mutex mu_;
  std::vector<std::weak_ptr<CallState>> calls_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<SerialWorker> worker_ = std::make_unique<SerialWorker>();  // last
};

GrpcGenerationCollector::GrpcGenerationCollector(
    std::string socket_path, std::function<void(std::function<void()>)> post,
    absl::Duration deadline)
    : impl_(std::make_unique<Impl>(std::move(socket_path), std::move(post), deadline)) {}

GrpcGenerationCollector::~GrpcGenerationCollector() = default;

std::unique_ptr<CollectCall> GrpcGenerationCollector::Collect(
    const GenerationRef& ref, std::function<void(CollectResult)> done) {
  return impl_->Collect(ref, std::move(done));
}

absl::StatusOr<PrivhelperGenerations> ListGenerationsOnce(const std::string& socket_path,
                                                          absl::Duration deadline) {
  std::unique_ptr<pb::PrivHelper::Stub> stub = PrivhelperStub(socket_path);
  grpc::ClientContext ctx;
  SetCallDeadline(&ctx, deadline);
  pb::ListGenerationsResponse resp;
  grpc::Status st = stub->ListGenerations(&ctx, pb::ListGenerationsRequest(), &resp);
  if (!st.ok()) {
    return absl::UnavailableError(CallError("ListGenerations", st));
  }
  PrivhelperGenerations out;
  out.truncated = resp.truncated();
  out.collection_running = resp.collection_running();
  out.preparation_running = resp.preparation_running();
  for (const pb::GenerationDetail& d : resp.generations()) {
    PrivhelperGenerationDetail o;
    o.report.generation = d.report().generation();
    o.report.specification_digest = d.report().specification_digest();
    o.report.state = StateOf(d.report().state()).value_or(HeldState::kFailed);
    if (o.report.state == HeldState::kFailed || o.report.state == HeldState::kNeedsRepair) {
      o.report.diagnostic = DiagnosticFromProto(static_cast<int>(d.report().diagnostic()));
    }
    if (o.report.generation <= 0) continue;
    o.has_progress = d.has_progress();
    o.artifacts_stored = d.artifacts_stored();
    o.artifacts_total = d.artifacts_total();
    o.bytes_stored = d.bytes_stored();
    o.bytes_total = d.bytes_total();
    o.import_started = d.import_started();
    for (int32_t p : d.helper_pids()) o.helper_pids.push_back(p);
    o.calls_in_flight = d.calls_in_flight();
    for (int32_t p : d.lease_holders()) o.lease_holders.push_back(p);
    o.collect_files_left = d.collect_files_left();
    o.native_done = d.native_done();
    o.last_collection_error = d.last_collection_error();
    out.generations.push_back(std::move(o));
  }
  return out;
}

}  // namespace sn::agent

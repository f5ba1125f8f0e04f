#include "agent/privhelper_client.h"

#include <grpcpp/grpcpp.h>

#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {

namespace pb = ::sn::privhelper::v1;

Diagnostic DiagnosticFromProto(int proto_value) {
  if (!pb::Diagnostic_IsValid(proto_value) || proto_value == pb::DIAGNOSTIC_UNSPECIFIED) {
    return Diagnostic::kProviderUnavailable;
  }
  std::string name = absl::AsciiStrToLower(pb::Diagnostic_Name(static_cast<pb::Diagnostic>(
      proto_value)));
  std::optional<Diagnostic> d = ParseDiagnostic(name);
  return d.value_or(Diagnostic::kProviderUnavailable);
}

absl::StatusOr<ProbeOutcome> ProbeOnce(const std::string& socket_path, int64_t generation,
                                       absl::Duration deadline) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(absl::StrCat("unix:", socket_path), grpc::InsecureChannelCredentials());
  std::unique_ptr<pb::PrivHelper::Stub> stub = pb::PrivHelper::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(absl::ToInt64Milliseconds(deadline)));
  pb::ProbeRequest req;
  req.set_generation(generation);
  pb::ProbeResponse resp;
  grpc::Status st = stub->Probe(&ctx, req, &resp);
  if (!st.ok()) {
    return absl::UnavailableError(absl::StrCat("privhelper Probe failed (grpc code ",
                                               static_cast<int>(st.error_code()),
                                               "): ", st.error_message()));
  }
  ProbeOutcome out;
  out.ready = resp.ready();
  out.diagnostic = out.ready ? Diagnostic::kProviderUnavailable
                             : DiagnosticFromProto(static_cast<int>(resp.diagnostic()));
  out.backend_fingerprint = resp.backend_fingerprint();
  out.provider = resp.provider();
  out.installation_id = resp.installation_id();
  return out;
}

// One thread running queued closures in order.
class GrpcProber::Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() {
    {
      absl::MutexLock l(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }
  void Run(std::function<void()> fn) {
    absl::MutexLock l(&mu_);
    queue_.push_back(std::move(fn));
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> fn;
      {
        absl::MutexLock l(&mu_);
        mu_.Await(absl::Condition(
            +[](Worker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
              return w->stopping_ || !w->queue_.empty();
            },
            this));
        if (stopping_) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

GrpcProber::GrpcProber(std::string socket_path, absl::Duration deadline,
                       std::function<void(std::function<void()>)> post)
    : socket_path_(std::move(socket_path)),
      deadline_(deadline),
      post_(std::move(post)),
      worker_(std::make_unique<Worker>()) {}

GrpcProber::~GrpcProber() = default;

void GrpcProber::Probe(int64_t generation,
                       std::function<void(absl::StatusOr<ProbeOutcome>)> done) {
  worker_->Run([this, generation, done = std::move(done)]() mutable {
    absl::StatusOr<ProbeOutcome> outcome = ProbeOnce(socket_path_, generation, deadline_);
    post_([done = std::move(done), outcome = std::move(outcome)]() mutable {
      done(std::move(outcome));
    });
  });
}

}  // namespace sn::agent

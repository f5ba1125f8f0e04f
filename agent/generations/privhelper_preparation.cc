#include "agent/generations/privhelper_preparation.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/privhelper_rpc/channel.h"
#include "agent/privhelper_rpc/privhelper_client.h"
#include "common/log.h"
#include "common/process_init.h"
#include "proto/execute_stream.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {

namespace pb = ::sn::privhelper::v1;

namespace {

std::optional<HeldState> StateOf(pb::GenerationState s) { return HeldStateFromProto(s); }

StepAnswer Answer(const char* call, const grpc::Status& st, const pb::PreparationResult& r,
                  CancelToken* cancel) {
  StepAnswer a;
  if (!st.ok()) {
    const bool cancelled = cancel != nullptr && cancel->cancelled();
    if (!cancelled) {
      LogWarning(absl::StrCat("privhelper ", call, " failed"),
                 {{"grpc_code", static_cast<int>(st.error_code())},
                  {"error", st.error_message()}});
    }
    a.failure = cancelled ? Diagnostic::kPreparationCancelled : Diagnostic::kProviderUnavailable;
    return a;
  }
  if (r.diagnostic() != pb::DIAGNOSTIC_UNSPECIFIED) {
    a.failure = DiagnosticFromProto(static_cast<int>(r.diagnostic()));
  }
  a.state = StateOf(r.state());
  a.missing_artifacts.assign(r.missing_artifacts().begin(), r.missing_artifacts().end());
  for (const pb::PartialArtifact& p : r.partial_artifacts()) {
    a.partial_artifacts[p.name()] = p.held_bytes();
  }
  return a;
}

// The upload is pipelined: the caller (the download's thread) gathers the bytes into messages
// of kMaxPayloadChunkBytes and queues them; a sender thread of the upload's own writes them to
// the stream. So the next piece is read from Core (and hashed) while the previous message is
// still in gRPC's hands, instead of the two waiting for each other (docs/performance.md,
// "Preparation"). At most kQueuedMessages wait, so memory stays bounded.
class GrpcArtifactUpload final : public ArtifactUpload {
 public:
  static constexpr size_t kQueuedMessages = 2;

  GrpcArtifactUpload(pb::PrivHelper::Stub* stub, int64_t generation, const std::string& name,
                     uint64_t offset, CancelToken* cancel, absl::Duration deadline)
      : cancel_(cancel), registration_(cancel, [this] { ctx_.TryCancel(); }) {
    SetCallDeadline(&ctx_, deadline);
    writer_ = stub->PutArtifact(&ctx_, &result_);
    pb::ArtifactUpload header;
    header.mutable_header()->set_generation(generation);
    header.mutable_header()->set_name(name);
    header.mutable_header()->set_offset(offset);
    const bool open = writer_->Write(header);
    {
      absl::MutexLock lock(&mu_);
      open_ = open;
    }
    gathering_.reserve(privhelper::kMaxPayloadChunkBytes);
    sender_ = std::thread([this] { Send(); });
  }
  ~GrpcArtifactUpload() override {
    if (!finished_) Abort();
  }

  bool Write(std::string_view bytes) override {
    while (!bytes.empty()) {
      const size_t n =
          std::min(bytes.size(), privhelper::kMaxPayloadChunkBytes - gathering_.size());
      gathering_.append(bytes.data(), n);
      bytes.remove_prefix(n);
      if (gathering_.size() == privhelper::kMaxPayloadChunkBytes && !Enqueue()) return false;
    }
    absl::MutexLock lock(&mu_);
    return open_;
  }

  StepAnswer Finish() override {
    if (finished_) return Spent();
    finished_ = true;
    if (!gathering_.empty()) (void)Enqueue();
    return Close(StopSender(/*discard=*/false));
  }

  StepAnswer Suspend() override {
    if (finished_) return Spent();
    finished_ = true;
    if (!gathering_.empty()) (void)Enqueue();
    bool open = StopSender(/*discard=*/false);
    if (open) {
      pb::ArtifactUpload m;
      m.set_suspend(true);
      open = writer_->Write(m);
    }
    return Close(open);
  }

  void Abort() override {
    if (finished_) return;
    finished_ = true;
    ctx_.TryCancel();
    (void)StopSender(/*discard=*/true);
    (void)writer_->Finish();
    ReturnFreedMemory();
  }

 private:
  // Half-closes the stream if it is still `open` and returns privhelper's answer.
  StepAnswer Close(bool open) {
    if (open) writer_->WritesDone();
    grpc::Status st = writer_->Finish();
    ReturnFreedMemory();  // the stream's buffers, kept while it ran (common/process_init.h)
    return Answer("PutArtifact", st, result_, cancel_);
  }

  static StepAnswer Spent() {
    StepAnswer a;
    a.failure = Diagnostic::kProviderUnavailable;
    return a;
  }

  // Hands the gathered message to the sender, waiting while kQueuedMessages are queued. False
  // once the stream has ended.
  bool Enqueue() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](GrpcArtifactUpload* u) ABSL_EXCLUSIVE_LOCKS_REQUIRED(u->mu_) {
          return !u->open_ || u->queue_.size() < kQueuedMessages;
        },
        this));
    if (!open_) return false;
    queue_.push_back(std::move(gathering_));
    gathering_ = std::string();
    gathering_.reserve(privhelper::kMaxPayloadChunkBytes);
    return true;
  }

  // The sender thread: writes the queued messages in order until told to stop and the queue
  // is empty, or a write fails (the stream ended: privhelper answered, or the transport broke).
  void Send() {
    pb::ArtifactUpload m;
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](GrpcArtifactUpload* u) ABSL_EXCLUSIVE_LOCKS_REQUIRED(u->mu_) {
              return u->stopping_ || !u->queue_.empty();
            },
            this));
        if (queue_.empty()) return;
        m.set_data(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (!writer_->Write(m)) {
        absl::MutexLock lock(&mu_);
        open_ = false;
        queue_.clear();
        return;
      }
    }
  }

  // Stops the sender after it wrote what is queued (or drops it: `discard`); whether the
  // stream is still open.
  bool StopSender(bool discard) {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      if (discard) queue_.clear();
    }
    if (sender_.joinable()) sender_.join();
    absl::MutexLock lock(&mu_);
    return open_;
  }

  CancelToken* cancel_;
  grpc::ClientContext ctx_;
  pb::PreparationResult result_;
  std::unique_ptr<grpc::ClientWriter<pb::ArtifactUpload>> writer_;
  std::string gathering_;  // the caller's message being gathered
  bool finished_ = false;
  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);  // full messages for the sender
  bool open_ ABSL_GUARDED_BY(mu_) = false;              // no write has failed
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;                      // after what it uses; joined before they go
  CancelToken::Registration registration_;  // last: unregistered before ctx_ goes
};

}  // namespace

struct GrpcPrivhelperPreparation::Impl {
  std::unique_ptr<pb::PrivHelper::Stub> stub;
  absl::Duration step_deadline;
  absl::Duration long_deadline;

  template <class Req, class Call>
  StepAnswer Unary(const char* name, const Req& req, absl::Duration deadline,
                   CancelToken* cancel, Call call) {
    grpc::ClientContext ctx;
    SetCallDeadline(&ctx, deadline);
    pb::PreparationResult r;
    grpc::Status st;
    {
      CancelToken::Registration reg(cancel, [&ctx] { ctx.TryCancel(); });
      st = (stub.get()->*call)(&ctx, req, &r);
    }
    return Answer(name, st, r, cancel);
  }
};

GrpcPrivhelperPreparation::GrpcPrivhelperPreparation(const std::string& socket_path,
                                                     absl::Duration step_deadline,
                                                     absl::Duration long_deadline)
    : impl_(std::make_unique<Impl>()) {
  // A connection of its own: an artifact's upload stream may last half an hour.
  impl_->stub = PrivhelperStub(socket_path, PrivhelperConnection::kOwn);
  impl_->step_deadline = step_deadline;
  impl_->long_deadline = long_deadline;
}

GrpcPrivhelperPreparation::~GrpcPrivhelperPreparation() = default;

StepAnswer GrpcPrivhelperPreparation::AdoptRelease(const ReleaseFiles& files,
                                                   CancelToken* cancel) {
  pb::ReleaseMetadata req;
  req.set_source(files.source);
  req.set_manifest(files.manifest);
  req.set_signature(files.signature);
  req.set_sha256sums(files.sha256sums);
  return impl_->Unary("AdoptRelease", req, impl_->step_deadline, cancel,
                      &pb::PrivHelper::Stub::AdoptRelease);
}

StepAnswer GrpcPrivhelperPreparation::BeginPreparation(int64_t generation,
                                                       const std::string& specification,
                                                       const std::string& specification_digest,
                                                       CancelToken* cancel) {
  pb::BeginPreparationRequest req;
  req.set_generation(generation);
  req.set_specification(specification);
  req.set_specification_digest(specification_digest);
  return impl_->Unary("BeginPreparation", req, impl_->step_deadline, cancel,
                      &pb::PrivHelper::Stub::BeginPreparation);
}

std::unique_ptr<ArtifactUpload> GrpcPrivhelperPreparation::PutArtifact(int64_t generation,
                                                                       const std::string& name,
                                                                       uint64_t offset,
                                                                       CancelToken* cancel) {
  return std::make_unique<GrpcArtifactUpload>(impl_->stub.get(), generation, name, offset, cancel,
                                              impl_->long_deadline);
}

StepAnswer GrpcPrivhelperPreparation::FinishPreparation(int64_t generation,
                                                        CancelToken* cancel) {
  pb::FinishPreparationRequest req;
  req.set_generation(generation);
  return impl_->Unary("FinishPreparation", req, impl_->long_deadline, cancel,
                      &pb::PrivHelper::Stub::FinishPreparation);
}

}  // namespace sn::agent

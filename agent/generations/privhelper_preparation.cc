#include "agent/generations/privhelper_preparation.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/privhelper_client.h"
#include "common/log.h"
#include "proto/execute_stream.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {

namespace pb = ::sn::privhelper::v1;

namespace {

void SetDeadline(grpc::ClientContext* ctx, absl::Duration d) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(absl::ToInt64Milliseconds(d)));
}

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
  return a;
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& socket_path) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(static_cast<int>(privhelper::kMaxRequestMessageBytes));
  args.SetMaxReceiveMessageSize(4 << 20);  // a PreparationResult: at most 64 names
  return grpc::CreateCustomChannel(absl::StrCat("unix:", socket_path),
                                   grpc::InsecureChannelCredentials(), args);
}

class GrpcArtifactUpload final : public ArtifactUpload {
 public:
  GrpcArtifactUpload(pb::PrivHelper::Stub* stub, int64_t generation, const std::string& name,
                     CancelToken* cancel, absl::Duration deadline)
      : cancel_(cancel), registration_(cancel, [this] { ctx_.TryCancel(); }) {
    SetDeadline(&ctx_, deadline);
    writer_ = stub->PutArtifact(&ctx_, &result_);
    pb::ArtifactUpload header;
    header.mutable_header()->set_generation(generation);
    header.mutable_header()->set_name(name);
    open_ = writer_->Write(header);
  }
  ~GrpcArtifactUpload() override {
    if (!finished_) Abort();
  }

  // Bytes are gathered into messages of kMaxPayloadChunkBytes (the download hands them on in
  // 64 KiB pieces): four times fewer messages, each of which costs a trip through gRPC's flow
  // control and a wake-up of privhelper's reader (docs/performance.md, "Preparation").
  bool Write(std::string_view bytes) override {
    std::string* data = chunk_.mutable_data();
    while (open_ && !bytes.empty()) {
      const size_t n = std::min(bytes.size(), privhelper::kMaxPayloadChunkBytes - data->size());
      data->append(bytes.data(), n);
      bytes.remove_prefix(n);
      if (data->size() == privhelper::kMaxPayloadChunkBytes) {
        open_ = writer_->Write(chunk_);
        data->clear();
      }
    }
    return open_;
  }

  StepAnswer Finish() override {
    if (finished_) return Spent();
    finished_ = true;
    if (open_ && !chunk_.data().empty()) open_ = writer_->Write(chunk_);
    if (open_) writer_->WritesDone();
    grpc::Status st = writer_->Finish();
    return Answer("PutArtifact", st, result_, cancel_);
  }

  void Abort() override {
    if (finished_) return;
    finished_ = true;
    ctx_.TryCancel();
    (void)writer_->Finish();
  }

 private:
  static StepAnswer Spent() {
    StepAnswer a;
    a.failure = Diagnostic::kProviderUnavailable;
    return a;
  }

  CancelToken* cancel_;
  grpc::ClientContext ctx_;
  pb::PreparationResult result_;
  std::unique_ptr<grpc::ClientWriter<pb::ArtifactUpload>> writer_;
  pb::ArtifactUpload chunk_;  // the data message being gathered
  bool open_ = false;
  bool finished_ = false;
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
    SetDeadline(&ctx, deadline);
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
  impl_->stub = pb::PrivHelper::NewStub(NewChannel(socket_path));
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
                                                                       CancelToken* cancel) {
  return std::make_unique<GrpcArtifactUpload>(impl_->stub.get(), generation, name, cancel,
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

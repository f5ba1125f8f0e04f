#include "privhelper/rpc/server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>

#include <chrono>
#include <utility>

#include "common/log.h"
#include "privhelper/rpc/listener.h"
#include "privhelper/rpc/monitor.h"
#include "privhelper/rpc/peer.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

pb::Diagnostic ToProto(Diagnostic d) {
  // The proto enum is the .def order shifted by one (0 is DIAGNOSTIC_UNSPECIFIED); checked by
  // tests/diagnostics against the fixture.
  return static_cast<pb::Diagnostic>(static_cast<int>(d) + 1);
}

// Bounds privhelper re-checks on an Execute request before it reaches a helper (the agent's
// codec validated the wire arguments; these keep a confused caller from reaching native I/O).
absl::Status CheckExecute(const pb::ExecuteRequest& r) {
  if (r.generation() <= 0) return absl::InvalidArgumentError("generation must be positive");
  if (r.request_id().empty() || r.request_id().size() > 64) {
    return absl::InvalidArgumentError("request_id");
  }
  if (r.budget_ms() < 1 || r.budget_ms() > 3600000) return absl::InvalidArgumentError("budget_ms");
  if (r.operation_case() == pb::ExecuteRequest::OPERATION_NOT_SET) {
    return absl::InvalidArgumentError("no operation");
  }
  return absl::OkStatus();
}

class Service final : public pb::PrivHelper::Service {
 public:
  Service(const Monitor* monitor, Provider* provider, std::shared_ptr<HelperManager> helpers,
          std::string installation_id)
      : monitor_(monitor),
        provider_(provider),
        helpers_(std::move(helpers)),
        installation_id_(std::move(installation_id)) {}

  grpc::Status Execute(grpc::ServerContext* ctx, const pb::ExecuteRequest* req,
                       pb::ExecuteResponse* resp) override {
    absl::Status admitted = monitor_->Admit(Rpc::kExecute, ctx->peer());
    if (!admitted.ok()) return ToGrpc(admitted);
    absl::Status valid = CheckExecute(*req);
    if (!valid.ok()) return ToGrpc(valid);
    if (helpers_ == nullptr || installation_id_.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "privhelper has no installation identity");
    }
    if (req->installation_id() != installation_id_) {
      LogWarning("Execute refused: the caller names another installation",
                 {{"request_id", req->request_id()}});
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "the request names another installation than privhelper's");
    }
    ResolvedCall resolved;  // TODO(stub) replaced by the generation store's resolution
    if (req->has_create()) resolved.native_image = req->create().image();
    resolved.max_active = 16;
    resolved.max_retained = 64;
    absl::StatusOr<pb::ExecuteResponse> r =
        helpers_->Execute(*req, resolved, [ctx] { return ctx->IsCancelled(); });
    if (!r.ok()) {
      LogWarning("execute did not complete", {{"error", r.status().ToString()}});
      if (absl::IsCancelled(r.status())) return ToGrpc(r.status());  // the caller left
      // Typed outcomes, so the agent never has to guess from a transport status: no helper
      // took the call -> unavailable; the helper had it when the budget ran out or it died ->
      // a mutation may have started (uncertain), an observation is unavailable.
      const bool helper_had_it =
          absl::IsDeadlineExceeded(r.status()) || absl::IsAborted(r.status());
      const bool mutation = req->operation_case() != pb::ExecuteRequest::kInspect &&
                            req->operation_case() != pb::ExecuteRequest::kReadFile;
      resp->set_error_code(helper_had_it && mutation ? pb::ERROR_CODE_UNCERTAIN
                                                     : pb::ERROR_CODE_UNAVAILABLE);
      resp->set_native_call_started(helper_had_it);
      return grpc::Status::OK;
    }
    *resp = std::move(*r);
    return grpc::Status::OK;
  }

  grpc::Status Probe(grpc::ServerContext* ctx, const pb::ProbeRequest* req,
                     pb::ProbeResponse* resp) override {
    absl::Status admitted = monitor_->Admit(Rpc::kProbe, ctx->peer());
    if (!admitted.ok()) return ToGrpc(admitted);
    if (req->generation() <= 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "generation must be positive");
    }
    ProbeResult r = provider_->Probe();
    resp->set_provider(std::string(provider_->name()));
    resp->set_installation_id(installation_id_);
    resp->set_ready(r.ready);
    resp->set_backend_fingerprint(r.fingerprint);
    if (!r.ready) {
      resp->set_diagnostic(ToProto(r.diagnostic.value_or(Diagnostic::kProviderUnavailable)));
    }
    return grpc::Status::OK;
  }

 private:
  const Monitor* const monitor_;
  Provider* const provider_;
  const std::shared_ptr<HelperManager> helpers_;
  const std::string installation_id_;
};

}  // namespace

struct PrivHelperServer::Impl {
  Impl(uid_t agent_uid, std::unique_ptr<Provider> p, std::shared_ptr<HelperManager> h,
       std::string installation_id)
      : peers(agent_uid),
        monitor(&peers),
        provider(std::move(p)),
        service(&monitor, provider.get(), std::move(h), std::move(installation_id)) {}

  AdmittedPeers peers;
  Monitor monitor;
  std::unique_ptr<Provider> provider;
  Service service;
  std::unique_ptr<Listener> listener;
  std::unique_ptr<grpc::Server> server;
  bool shut_down = false;
};

absl::StatusOr<std::unique_ptr<PrivHelperServer>> PrivHelperServer::Start(
    const ServerOptions& options, std::unique_ptr<Provider> provider) {
  auto impl = std::make_unique<Impl>(options.agent_uid, std::move(provider), options.helpers,
                                     options.installation_id);
  absl::StatusOr<std::unique_ptr<Listener>> listener =
      Listener::Create(options.socket_path, options.agent_uid);
  if (!listener.ok()) return listener.status();
  impl->listener = std::move(*listener);

  grpc::ServerBuilder builder;
  builder.RegisterService(&impl->service);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr) return absl::InternalError("gRPC server failed to start");

  grpc::Server* server = impl->server.get();
  impl->listener->Start(&impl->peers, [server](int fd) { grpc::AddInsecureChannelFromFd(server, fd); });
  impl->monitor.SetState(ServerState::kServing);
  LogInfo("privhelper serving", {{"socket", options.socket_path},
                                 {"agent_uid", static_cast<uint64_t>(options.agent_uid)}});
  return std::unique_ptr<PrivHelperServer>(new PrivHelperServer(std::move(impl)));
}

PrivHelperServer::PrivHelperServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PrivHelperServer::~PrivHelperServer() { Shutdown(); }

void PrivHelperServer::Shutdown(absl::Duration grace) {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->monitor.SetState(ServerState::kStopping);
  impl_->listener->Stop();
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(absl::ToInt64Milliseconds(grace)));
  impl_->server->Wait();
  LogInfo("privhelper stopped");
}

}  // namespace sn::privhelper

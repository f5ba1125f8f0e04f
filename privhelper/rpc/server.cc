#include "privhelper/rpc/server.h"

#include <algorithm>
#include <array>
#include <atomic>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_posix.h>
#include <grpcpp/support/method_handler.h>

#include <chrono>
#include <optional>
#include <thread>
#include <utility>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/metrics/process_figures.h"
#include "common/process_init.h"
#include "common/wire/validate.h"
#include "privhelper/rpc/execute_check.h"
#include "privhelper/store/prep_failure.h"
#include "privhelper/rpc/listener.h"
#include "privhelper/rpc/monitor.h"
#include "privhelper/rpc/peer.h"
#include "privhelper/rpc/permits_proto.h"
#include "privhelper/rpc/preparation.h"
#include "privhelper/rpc/references.h"
#include "privhelper/rpc/retirement.h"
#include "privhelper/rpc/sandbox_fence.h"
#include "privhelper/rpc/slot_reservations.h"
#include "proto/execute_stream.h"
#include "proto/operation_of.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

pb::Diagnostic ToProto(Diagnostic d) { return DiagnosticToProto(d); }

// A typed refusal: the call is answered, the connection stays up.
grpc::Status RefuseCall(const Refusal& r, const pb::ExecuteRequest& req, pb::ExecuteResponse* resp) {
  LogWarning("Execute refused before any native I/O",
             {{"request_id", wire::IsUuid(req.request_id()) ? req.request_id() : "(invalid)"},
              {"refusal", pb::Refusal_Name(r.kind)},
              {"reason", r.reason}});
  resp->Clear();
  resp->set_error_code(r.code);
  resp->set_refusal(r.kind);
  return grpc::Status::OK;
}

// The provider's readiness probe as a repair's last step (PreparationContext).
std::function<absl::Status()> ReadinessProbe(Provider* provider) {
  return [provider]() -> absl::Status {
    ProbeResult r = provider->ProbeForReadiness();
    if (r.ready) return absl::OkStatus();
    return store::PrepFailure(absl::StatusCode::kUnavailable,
                              r.diagnostic.value_or(Diagnostic::kProviderUnavailable),
                              "the provider's readiness probe failed");
  };
}

// The service: the permit table is its dispatch. Its constructor registers, for each row of
// kPermits and nothing else, the row's method name with a handler that first admits the call
// by that row (Monitor::Admit: phase and peer) and only then runs the RPC's code below; a
// method without a row is never registered (the catch-all answers it as a violation). The
// generated PrivHelper::Service is not used: with it, a method added to the proto would get
// gRPC's default answer from outside the table, and each handler had to remember to admit.
class Service final : public grpc::Service {
 public:
  Service(Monitor* monitor, Provider* provider, const ServerOptions& o)
      : monitor_(monitor),
        provider_(provider),
        helpers_(o.helpers),
        installation_id_(o.installation_id),
        generations_(o.generations),
        max_active_(o.max_active),
        max_retained_(o.max_retained),
        slots_(o.max_active, o.max_retained),
        fence_(o.fence),
        admission_(o.max_concurrent_execute, o.max_inflight_request_bytes),
        control_(kMaxConcurrentControl, kMaxRequestMessageBytes),
        preparation_(1, kMaxRequestMessageBytes),
        prep_{o.generations, o.releases, o.importer, ReadinessProbe(provider)},
        retire_{o.generations, o.helpers.get(), &refs_, o.importer, o.retirement, o.fence} {
    for (const Permit& p : kPermits) Serve(p);
    if (dispatch_error_.empty()) dispatch_error_ = MethodCountMismatch(methods_served_);
  }

  // Empty, or why the permit table and the proto's service disagree (a method's name, shape
  // or message types): the server then does not start (PrivHelperServer::Start).
  const std::string& dispatch_error() const { return dispatch_error_; }

 private:
  // The RPCs, each run only after its permit-table row admitted the call (Serve).

  grpc::Status Probe(grpc::ServerContext*, const pb::ProbeRequest* req,
                     pb::ProbeResponse* resp) {
    std::optional<Admission::Ticket> ticket = control_.TryAdmit(0);
    if (!ticket.has_value()) return ControlRefused();
    if (req->generation() < 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "generation must not be negative");
    }
    const MonoTime probe_start = SystemClock::Get()->Monotonic();
    ProbeResult r = provider_->Probe();
    AddFigures(absl::ToDoubleSeconds(SystemClock::Get()->Monotonic() - probe_start),
               resp->mutable_figures());
    resp->set_provider(std::string(provider_->name()));
    resp->set_installation_id(installation_id_);
    resp->set_ready(r.ready);
    resp->set_backend_fingerprint(r.fingerprint);
    if (!r.ready) {
      resp->set_diagnostic(ToProto(r.diagnostic.value_or(Diagnostic::kProviderUnavailable)));
    }
    resp->set_max_active(max_active_);
    resp->set_max_retained(max_retained_);
    if (r.sandboxes.has_value()) {
      resp->set_sandboxes_counted(true);
      resp->set_sandboxes_active(r.sandboxes->active);
      resp->set_sandboxes_retained(r.sandboxes->retained);
    }
    if (generations_ != nullptr) {
      // Restart recovery: a ready generation whose files or images went missing needs repair
      // (images only while the backend answers; presence only, the bytes were verified at
      // start and whenever used).
      generations_->Recheck(r.ready ? prep_.importer : nullptr, /*verify_bytes=*/false);
      // A generation adopted at this start is usable only once a provider probe passed
      // (docs/protocol.md 20a); this one did, and its images were just looked up.
      if (r.ready) generations_->ProviderProbePassed();
      AddGenerationReports(*generations_, resp);
    }
    return grpc::Status::OK;
  }

  grpc::Status AdoptRelease(grpc::ServerContext*, const pb::ReleaseMetadata* req,
                            pb::PreparationResult* resp) {
    return Prepare([&] { *resp = privhelper::AdoptRelease(prep_, *req); });
  }
  grpc::Status BeginPreparation(grpc::ServerContext*, const pb::BeginPreparationRequest* req,
                                pb::PreparationResult* resp) {
    return Prepare([&] { *resp = privhelper::BeginPreparation(prep_, *req); });
  }
  grpc::Status PutArtifact(grpc::ServerContext* ctx,
                           grpc::ServerReader<pb::ArtifactUpload>* reader,
                           pb::PreparationResult* resp) {
    grpc::Status st = Prepare([&] {
      *resp = privhelper::PutArtifact(
          prep_, [reader](pb::ArtifactUpload* m) { return reader->Read(m); },
          [ctx] { return ctx->IsCancelled(); });
    });
    ReturnFreedMemory();  // the stream's buffers, kept while it ran (common/process_init.h)
    return st;
  }
  grpc::Status FinishPreparation(grpc::ServerContext*,
                                 const pb::FinishPreparationRequest* req,
                                 pb::PreparationResult* resp) {
    return Prepare([&] {
      *resp = privhelper::FinishPreparation(prep_, *req);
      if (generations_ != nullptr && !generations_->empty() &&
          monitor_->phase() == Phase::kUnregistered) {
        monitor_->SetPhase(Phase::kServing);
      }
    });
  }

  // Collection shares preparation's slot: one change to the generation store at a time.
  grpc::Status CollectGeneration(grpc::ServerContext* ctx,
                                 const pb::CollectGenerationRequest* req,
                                 pb::CollectGenerationResult* resp) {
    return Prepare([&] {
      *resp = privhelper::CollectGeneration(retire_, *req, [ctx] { return ctx->IsCancelled(); });
    });
  }

  grpc::Status ListGenerations(grpc::ServerContext*, const pb::ListGenerationsRequest*,
                               pb::ListGenerationsResponse* resp) {
    std::optional<Admission::Ticket> ticket = control_.TryAdmit(0);
    if (!ticket.has_value()) return ControlRefused();
    if (generations_ == nullptr) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no generation store");
    }
    *resp = privhelper::ListGenerations(retire_, preparation_.calls() > 0);
    return grpc::Status::OK;
  }

  grpc::Status Execute(grpc::ServerContext* ctx, grpc::ServerReader<pb::ExecuteMessage>* reader,
                       pb::ExecuteResponse* resp) {
    pb::ExecuteMessage first;
    if (!reader->Read(&first)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the stream ended before its request");
    }
    pb::ExecuteRequest req;
    if (first.has_request()) req.Swap(first.mutable_request());
    if (!first.has_request()) {
      return Refuse(Refusal{pb::REFUSAL_ARGUMENTS, pb::ERROR_CODE_INVALID,
                            "the stream does not start with a request"},
                    req, resp);
    }
    if (Refusal r = CheckArguments(req); r.refused()) return Refuse(r, req, resp);
    ResolvedCall resolved;
    ResolveContext rc{installation_id_, generations_, max_active_, max_retained_};
    if (Refusal r = Resolve(req, rc, &resolved); r.refused()) return Refuse(r, req, resp);
    // A reference on the generation until this call returns: collection refuses meanwhile, and
    // a generation a collection is checking (or has dropped) takes no new call.
    std::optional<GenerationRefs::Ref> ref = refs_.Acquire(req.generation());
    if (!ref.has_value() || generations_ == nullptr ||
        generations_->Find(req.generation()) == nullptr) {
      return Refuse(Refusal{pb::REFUSAL_GENERATION_NOT_HELD, pb::ERROR_CODE_UNCONFIRMED,
                            "the generation is being collected or was dropped"},
                    req, resp);
    }
    const size_t payload_bytes = static_cast<size_t>(req.payload_bytes());
    std::optional<Admission::Ticket> ticket =
        admission_.TryAdmit(req.ByteSizeLong() + payload_bytes);
    if (!ticket.has_value()) {
      return Refuse(Refusal{pb::REFUSAL_ADMISSION, pb::ERROR_CODE_UNAVAILABLE,
                            "too many calls or request bytes in flight"},
                    req, resp);
    }
    // Only an admitted call's payload is read, into memory the ticket accounts for.
    if (Refusal r = ReadPayload([reader](pb::ExecuteMessage* m) { return reader->Read(m); },
                                payload_bytes, &req);
        r.refused()) {
      if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "caller left");
      return Refuse(r, req, resp);
    }
    const MonoTime started = SystemClock::Get()->Monotonic();
    // The sandbox fence (docs/protocol.md 22e): a create holds its sandbox until privhelper sees
    // its native exchange end; meanwhile no answer says the sandbox is absent.
    std::optional<SandboxFence::Entry> fenced;
    if (fence_ != nullptr && OperationOf(req) == Operation::kCreate) {
      std::variant<SandboxFence::Entry, SandboxFence::Refused> e = fence_->Enter(
          SandboxIdOf(req), req.generation(),
          started + absl::Milliseconds(req.budget_ms()) + HelperManager::kFinalOutcomeGrace);
      if (auto* refused = std::get_if<SandboxFence::Refused>(&e)) {
        if (*refused == SandboxFence::Refused::kBusy) {
          return Refuse(Refusal{pb::REFUSAL_SANDBOX_BUSY, pb::ERROR_CODE_UNAVAILABLE,
                                "a create of the sandbox is in flight or may still land"},
                        req, resp);
        }
        return Refuse(Refusal{pb::REFUSAL_ADMISSION, pb::ERROR_CODE_UNAVAILABLE,
                              *refused == SandboxFence::Refused::kFull
                                  ? "too many sandboxes fenced"
                                  : "the sandbox fence's record could not be written"},
                      req, resp);
      }
      fenced.emplace(std::get<SandboxFence::Entry>(std::move(e)));
    }
    // A capacity slot from here until the helper's answer (docs/protocol.md 22a): the helper
    // counts the other calls of the kind in flight now beside its inventory.
    const std::optional<SlotClaim> claim = SlotOf(req);
    std::optional<SlotReservations::Reservation> slot =
        claim.has_value() ? slots_.TryReserve(claim->kind, claim->sandbox_id) : std::nullopt;
    if (claim.has_value() && !slot.has_value()) {
      return Refuse(Refusal{pb::REFUSAL_CAPACITY, pb::ERROR_CODE_CAPACITY,
                            "as many calls of its capacity kind in flight as the bound"},
                    req, resp);
    }
    if (slot.has_value()) resolved.in_flight_sandbox_ids = slot->others();
    absl::StatusOr<pb::ExecuteResponse> r =
        helpers_->Execute(req, resolved, [ctx] { return ctx->IsCancelled(); });
    // A mutation whose native exchange privhelper did not see end may still act: its sandbox
    // stays fenced and its capacity slot held until then (a create or resume landing after its
    // slot went would put one more sandbox beyond the bound than the helpers counted).
    if (const std::optional<MonoTime> until =
            UnsettledUntil(r, started + absl::Milliseconds(req.budget_ms()))) {
      if (slot.has_value()) slot->HoldUntil(*until);
      if (fenced.has_value()) fenced->HoldUntil(*until);
    }
    if (r.ok() && fence_ != nullptr) FenceAnswer(req, &*r);
    if (!r.ok()) {
      LogWarning("execute did not complete", {{"request_id", req.request_id()},
                                              {"error", r.status().ToString()}});
      if (absl::IsCancelled(r.status())) return ToGrpc(r.status());  // the caller left
      // Typed outcomes, so the agent never has to guess from a transport status: no helper
      // took the call -> unavailable; the helper had it when the budget ran out or it died ->
      // a mutation may have started (uncertain), an observation is unavailable.
      const bool helper_had_it =
          absl::IsDeadlineExceeded(r.status()) || absl::IsAborted(r.status());
      resp->set_error_code(helper_had_it && IsMutationRequest(req) ? pb::ERROR_CODE_UNCERTAIN
                                                                   : pb::ERROR_CODE_UNAVAILABLE);
      resp->set_native_call_started(helper_had_it);
      return grpc::Status::OK;
    }
    *resp = std::move(*r);
    return grpc::Status::OK;
  }

  // Registers the handler of `p`'s RPC under `p`'s method name. The switch is exhaustive
  // (-Werror=switch): an Rpc without code does not build.
  void Serve(const Permit& p) {
    switch (p.rpc) {
      case Rpc::kProbe: return Unary(p, &Service::Probe);
      case Rpc::kAdoptRelease: return Unary(p, &Service::AdoptRelease);
      case Rpc::kBeginPreparation: return Unary(p, &Service::BeginPreparation);
      case Rpc::kPutArtifact: return ClientStream(p, &Service::PutArtifact);
      case Rpc::kFinishPreparation: return Unary(p, &Service::FinishPreparation);
      case Rpc::kCollectGeneration: return Unary(p, &Service::CollectGeneration);
      case Rpc::kListGenerations: return Unary(p, &Service::ListGenerations);
      case Rpc::kExecute: return ClientStream(p, &Service::Execute);
    }
  }

  template <typename Req, typename Resp>
  void Unary(const Permit& p,
             grpc::Status (Service::*rpc)(grpc::ServerContext*, const Req*, Resp*)) {
    Matches(p, Req::descriptor(), Resp::descriptor(), /*client_streaming=*/false);
    // p.method views a string literal of the table: NUL-terminated, static.
    AddMethod(new grpc::internal::RpcServiceMethod(
        p.method.data(), grpc::internal::RpcMethod::NORMAL_RPC,
        new grpc::internal::RpcMethodHandler<Service, Req, Resp, grpc::protobuf::MessageLite,
                                             grpc::protobuf::MessageLite>(
            [&p, rpc](Service* s, grpc::ServerContext* ctx, const Req* req, Resp* resp) {
              absl::Status admitted = s->monitor_->Admit(p.rpc, ctx->peer());
              if (!admitted.ok()) return ToGrpc(admitted);
              return (s->*rpc)(ctx, req, resp);
            },
            this)));
  }

  template <typename Req, typename Resp>
  void ClientStream(const Permit& p, grpc::Status (Service::*rpc)(grpc::ServerContext*,
                                                                  grpc::ServerReader<Req>*,
                                                                  Resp*)) {
    Matches(p, Req::descriptor(), Resp::descriptor(), /*client_streaming=*/true);
    AddMethod(new grpc::internal::RpcServiceMethod(
        p.method.data(), grpc::internal::RpcMethod::CLIENT_STREAMING,
        new grpc::internal::ClientStreamingHandler<Service, Req, Resp>(
            [&p, rpc](Service* s, grpc::ServerContext* ctx, grpc::ServerReader<Req>* reader,
                      Resp* resp) {
              absl::Status admitted = s->monitor_->Admit(p.rpc, ctx->peer());
              if (!admitted.ok()) return ToGrpc(admitted);
              return (s->*rpc)(ctx, reader, resp);
            },
            this)));
  }

  // Counts the row and records the first way it disagrees with the proto (permits_proto.h).
  void Matches(const Permit& p, const google::protobuf::Descriptor* request,
               const google::protobuf::Descriptor* response, bool client_streaming) {
    ++methods_served_;
    if (dispatch_error_.empty()) {
      dispatch_error_ = RowMismatch(p, request, response, client_streaming);
    }
  }

  // One preparation step at a time (the agent serializes preparation; a second concurrent step
  // is refused rather than queued).
  template <typename Fn>
  grpc::Status Prepare(Fn&& step) {
    if (prep_.generations == nullptr || prep_.releases == nullptr || prep_.importer == nullptr) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no generation store");
    }
    std::optional<Admission::Ticket> ticket = preparation_.TryAdmit(0);
    if (!ticket.has_value()) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "a preparation step is running");
    }
    step();
    return grpc::Status::OK;
  }

  // When privhelper did not see a mutation's native exchange end, the time until which what the
  // helper sent may still be carried out (sandbox_fence.h); nullopt when it saw the end (an
  // answer other than `uncertain`, or no helper took the call). `budget_end`: the call's start
  // plus its budget.
  static std::optional<MonoTime> UnsettledUntil(const absl::StatusOr<pb::ExecuteResponse>& r,
                                                MonoTime budget_end) {
    // Seen: the helper answered (`uncertain` means its native request did not get its answer),
    // or no helper took the call.
    const bool cancelled = absl::IsCancelled(r.status());
    const bool unseen = r.ok() ? r->error_code() == pb::ERROR_CODE_UNCERTAIN
                               : cancelled || absl::IsDeadlineExceeded(r.status()) ||
                                     absl::IsAborted(r.status());
    if (!unseen) return std::nullopt;
    // The helper acts until its budget's end and its final-outcome grace, then the daemon.
    const MonoTime latest =
        budget_end + HelperManager::kFinalOutcomeGrace + SandboxFence::kNativeSettle;
    // Nobody reads the helper's answer: it may act until that end.
    if (cancelled) return latest;
    // Answered `uncertain`, signalled without a final outcome, or died with the call: what it
    // sent may still run for kNativeSettle.
    return std::min(SystemClock::Get()->Monotonic() + SandboxFence::kNativeSettle, latest);
  }

  // A helper's answer about a fenced sandbox: absence is not proof while a create may still
  // land (`unavailable` instead: nothing was mutated); any sign that it exists ends a held fence.
  void FenceAnswer(const pb::ExecuteRequest& req, pb::ExecuteResponse* r) {
    const std::string& sandbox = SandboxIdOf(req);
    if (!fence_->Fenced(sandbox)) return;
    const bool absent = r->error_code() == pb::ERROR_CODE_NOT_FOUND ||
                        (r->error_code() == pb::ERROR_CODE_NONE && r->has_sandbox() &&
                         r->sandbox().state() == pb::SANDBOX_STATE_ABSENT);
    if (absent) {
      LogInfo("absence not proven: a create of the sandbox may still land",
              {{"request_id", req.request_id()}, {"sandbox_id", sandbox}});
      pb::ExecuteResponse unavailable;
      unavailable.set_error_code(pb::ERROR_CODE_UNAVAILABLE);
      *r = std::move(unavailable);
      return;
    }
    if (r->error_code() == pb::ERROR_CODE_NONE || r->error_code() == pb::ERROR_CODE_CONFLICT) {
      fence_->SawSandbox(sandbox);
    }
  }

  // RefuseCall, counted by kind for the figures Probe reports.
  grpc::Status Refuse(const Refusal& r, const pb::ExecuteRequest& req, pb::ExecuteResponse* resp) {
    const size_t k = static_cast<size_t>(r.kind);
    if (k < refusals_.size()) refusals_[k].fetch_add(1, std::memory_order_relaxed);
    return RefuseCall(r, req, resp);
  }

  // privhelper's own figures (PrivhelperFigures).
  void AddFigures(double probe_seconds, pb::PrivhelperFigures* f) const {
    f->set_helpers_live(helpers_ != nullptr ? helpers_->live_helpers() : 0);
    for (size_t k = 1; k < refusals_.size(); ++k) {
      if (!pb::Refusal_IsValid(static_cast<int>(k))) continue;
      pb::RefusalCount* c = f->add_refusals();
      c->set_refusal(static_cast<pb::Refusal>(k));
      c->set_count(refusals_[k].load(std::memory_order_relaxed));
    }
    if (helpers_ != nullptr) {
      // One entry per generation a live helper serves: bounded by the held generations.
      for (const auto& [g, n] : helpers_->live_by_generation()) {
        pb::GenerationHelpers* h = f->add_generation_helpers();
        h->set_generation(g);
        h->set_helpers(n);
      }
    }
    f->set_violations(monitor_->violations());
    f->set_probe_seconds(probe_seconds);
    if (absl::StatusOr<metrics::ProcessFigures> p = metrics::ReadProcessFigures(); p.ok()) {
      f->set_resident_bytes(p->resident_bytes);
      f->set_cpu_seconds(p->cpu_seconds);
      f->set_open_fds(p->open_fds);
    }
  }

  static grpc::Status ControlRefused() {
    LogWarning("control call refused: too many at once");
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "too many control calls at once");
  }

  Monitor* const monitor_;
  Provider* const provider_;
  const std::shared_ptr<HelperManager> helpers_;
  const std::string installation_id_;
  store::GenerationStore* const generations_;
  const int64_t max_active_;
  const int64_t max_retained_;
  SlotReservations slots_;  // Execute's capacity slots, the installation's
  SandboxFence* const fence_;  // may be null (tests without one)
  Admission admission_;  // Execute
  Admission control_;      // Probe, ListGenerations
  // AdoptRelease, BeginPreparation, PutArtifact, FinishPreparation, CollectGeneration
  Admission preparation_;
  GenerationRefs refs_;
  const PreparationContext prep_;
  const RetirementContext retire_;
  size_t methods_served_ = 0;
  std::string dispatch_error_;
  std::array<std::atomic<int64_t>, 8> refusals_{};  // by pb::Refusal value
};

// Every method that is not in the permit table lands here: a violation. An async generic
// service on a completion queue of its own, answered by one thread: a callback generic service
// would start gRPC's two "nexting" threads, which poll beside the sync server's threads and,
// measured, doubled privhelper's CPU time and context switches per Execute
// (docs/performance.md).
class CatchAll {
 public:
  explicit CatchAll(Monitor* monitor) : monitor_(monitor) {}
  ~CatchAll() { Stop(); }

  void Register(grpc::ServerBuilder* builder) {
    builder->RegisterAsyncGenericService(&service_);
    cq_ = builder->AddCompletionQueue(/*is_frequently_polled=*/false);
  }
  // After the server started.
  void Start() {
    {
      absl::MutexLock lock(&mu_);
      RequestNext();
    }
    thread_ = std::thread([this] { Loop(); });
  }
  // After the server's Shutdown: shuts the queue down and ends the thread. Idempotent.
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (cq_ == nullptr || stopping_) return;
      stopping_ = true;
      cq_->Shutdown();
    }
    if (thread_.joinable()) {
      thread_.join();
    } else {
      Loop();  // never started: drain the queue here
    }
  }

 private:
  struct Call {
    grpc::GenericServerContext ctx;
    grpc::GenericServerAsyncReaderWriter stream{&ctx};
    bool answered = false;
  };

  void RequestNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stopping_) return;  // a shut-down queue takes no new request
    auto* c = new Call;
    service_.RequestCall(&c->ctx, &c->stream, cq_.get(), cq_.get(), c);
  }

  void Loop() {
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) {
      auto* c = static_cast<Call*>(tag);
      if (!ok || c->answered) {  // the answer went out, or the server is shutting down
        delete c;
        continue;
      }
      c->answered = true;
      {
        absl::MutexLock lock(&mu_);
        RequestNext();
      }
      absl::Status s = monitor_->RefuseUnknownMethod(c->ctx.method(), c->ctx.peer());
      c->stream.Finish(ToGrpc(s), c);
    }
  }

  Monitor* const monitor_;
  grpc::AsyncGenericService service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace

struct PrivHelperServer::Impl {
  Impl(const ServerOptions& o, std::unique_ptr<Provider> p)
      : peers(o.agent_uid),
        monitor(&peers),
        provider(std::move(p)),
        service(&monitor, provider.get(), o),
        catch_all(&monitor) {}

  AdmittedPeers peers;
  Monitor monitor;
  std::unique_ptr<Provider> provider;
  Service service;
  CatchAll catch_all;
  std::unique_ptr<Listener> listener;
  std::unique_ptr<grpc::Server> server;
  bool shut_down = false;
};

absl::StatusOr<std::unique_ptr<PrivHelperServer>> PrivHelperServer::Start(
    const ServerOptions& options, std::unique_ptr<Provider> provider,
    std::unique_ptr<Listener> bound) {
  auto impl = std::make_unique<Impl>(options, std::move(provider));
  if (!impl->service.dispatch_error().empty()) {
    return absl::InternalError("privhelper's dispatch: " + impl->service.dispatch_error());
  }
  if (bound != nullptr) {
    impl->listener = std::move(bound);
  } else {
    absl::StatusOr<std::unique_ptr<Listener>> listener =
        Listener::Create(options.socket_path, options.agent_uid);
    if (!listener.ok()) return listener.status();
    impl->listener = std::move(*listener);
  }

  grpc::ResourceQuota quota("privhelper");
  quota.SetMaxThreads(kMaxServerThreads);
  quota.Resize(kServerMemoryQuota);
  grpc::ServerBuilder builder;
  builder.SetResourceQuota(quota);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS,
                              kServerCompletionQueues);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS,
                              kMaxServerPollers);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              kMaxServerPollers);
  builder.RegisterService(&impl->service);
  impl->catch_all.Register(&builder);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxRequestMessageBytes));
  builder.SetMaxSendMessageSize(static_cast<int>(kMaxResponseMessageBytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreamsPerConnection);
  // A fixed receive window per stream instead of one the BDP probe grows: what gRPC buffers
  // for a stream (an artifact upload, a payload) stays bounded, so privhelper's memory does
  // not grow with the agent's send rate (docs/performance.md, "Preparation").
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr) return absl::InternalError("gRPC server failed to start");

  impl->catch_all.Start();
  grpc::Server* server = impl->server.get();
  impl->listener->Start(&impl->peers,
                        [server](int fd) { grpc::AddInsecureChannelFromFd(server, fd); });
  const bool held = options.generations != nullptr && !options.generations->empty();
  impl->monitor.SetPhase(held ? Phase::kServing : Phase::kUnregistered);
  LogInfo("privhelper serving", {{"socket", options.socket_path},
                                 {"agent_uid", static_cast<uint64_t>(options.agent_uid)},
                                 {"phase", PhaseName(impl->monitor.phase())}});
  return std::unique_ptr<PrivHelperServer>(new PrivHelperServer(std::move(impl)));
}

PrivHelperServer::PrivHelperServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PrivHelperServer::~PrivHelperServer() { Shutdown(); }

int64_t PrivHelperServer::violations() const { return impl_->monitor.violations(); }

void PrivHelperServer::Shutdown(absl::Duration grace) {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->monitor.SetPhase(Phase::kStopping);
  impl_->listener->Stop();
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(absl::ToInt64Milliseconds(grace)));
  impl_->server->Wait();
  impl_->catch_all.Stop();
  LogInfo("privhelper stopped");
}

}  // namespace sn::privhelper

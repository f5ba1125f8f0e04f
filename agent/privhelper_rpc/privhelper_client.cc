#include "agent/privhelper_rpc/privhelper_client.h"

#include <algorithm>

#include <grpcpp/grpcpp.h>

#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "agent/privhelper_rpc/channel.h"
#include "common/wire/limits.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {

namespace pb = ::sn::privhelper::v1;

bool ProbeOutcome::Holds(int64_t generation, const std::string& digest) const {
  for (const GenerationReport& g : generations) {
    if (g.generation == generation && g.specification_digest == digest &&
        g.state == HeldState::kReady) {
      return true;
    }
  }
  return false;
}

bool LimitsInRange(const ProviderLimits& l) {
  return l.max_active >= wire::kMinMaxActive && l.max_active <= wire::kMaxMaxActive &&
         l.max_retained >= wire::kMinMaxRetained && l.max_retained <= wire::kMaxMaxRetained;
}

Diagnostic DiagnosticFromProto(int proto_value) {
  if (!pb::Diagnostic_IsValid(proto_value) || proto_value == pb::DIAGNOSTIC_UNSPECIFIED) {
    return Diagnostic::kProviderUnavailable;
  }
  std::string name = absl::AsciiStrToLower(pb::Diagnostic_Name(static_cast<pb::Diagnostic>(
      proto_value)));
  std::optional<Diagnostic> d = ParseDiagnostic(name);
  return d.value_or(Diagnostic::kProviderUnavailable);
}

std::optional<HeldState> HeldStateFromProto(int proto_value) {
  switch (proto_value) {
    case pb::GENERATION_STATE_PREPARING: return HeldState::kPreparing;
    case pb::GENERATION_STATE_READY: return HeldState::kReady;
    case pb::GENERATION_STATE_FAILED: return HeldState::kFailed;
    case pb::GENERATION_STATE_COLLECTING: return HeldState::kCollecting;
    case pb::GENERATION_STATE_DROPPED: return HeldState::kDropped;
    case pb::GENERATION_STATE_NEEDS_REPAIR: return HeldState::kNeedsRepair;
    default: return std::nullopt;
  }
}

namespace {

// The refusal kinds' labels (proto Refusal); others are not reported.
std::string_view RefusalLabel(pb::Refusal r) {
  switch (r) {
    case pb::REFUSAL_ARGUMENTS: return "arguments";
    case pb::REFUSAL_GENERATION_NOT_HELD: return "generation_not_held";
    case pb::REFUSAL_ADMISSION: return "admission";
    case pb::REFUSAL_INSTALLATION: return "installation";
    case pb::REFUSAL_GENERATION_NOT_READY: return "generation_not_ready";
    case pb::REFUSAL_CAPACITY: return "capacity";
    case pb::REFUSAL_SANDBOX_BUSY: return "sandbox_busy";
    default: return {};
  }
}

PrivhelperFigures FiguresFrom(const pb::PrivhelperFigures& f) {
  PrivhelperFigures out;
  out.helpers_live = std::max<int64_t>(0, f.helpers_live());
  for (const pb::RefusalCount& c : f.refusals()) {
    const std::string_view label = RefusalLabel(c.refusal());
    const bool seen = std::any_of(out.refusals.begin(), out.refusals.end(),
                                  [&](const auto& r) { return r.first == label; });
    if (!label.empty() && !seen && c.count() >= 0) out.refusals.emplace_back(label, c.count());
  }
  out.violations = std::max<int64_t>(0, f.violations());
  out.probe_seconds = std::max(0.0, f.probe_seconds());
  out.resident_bytes = std::max<int64_t>(0, f.resident_bytes());
  out.cpu_seconds = std::max(0.0, f.cpu_seconds());
  out.open_fds = std::max<int64_t>(0, f.open_fds());
  for (const pb::GenerationHelpers& h : f.generation_helpers()) {
    if (h.generation() > 0 && h.helpers() > 0) {
      out.helpers_by_generation.emplace_back(h.generation(), h.helpers());
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<ProbeOutcome> ProbeOnce(const std::string& socket_path, int64_t generation,
                                       absl::Duration deadline) {
  std::unique_ptr<pb::PrivHelper::Stub> stub = PrivhelperStub(socket_path);
  grpc::ClientContext ctx;
  SetCallDeadline(&ctx, deadline);
  pb::ProbeRequest req;
  req.set_generation(generation);
  pb::ProbeResponse resp;
  grpc::Status st = stub->Probe(&ctx, req, &resp);
  if (!st.ok()) return absl::UnavailableError(CallError("Probe", st));
  ProbeOutcome out;
  out.ready = resp.ready();
  out.diagnostic = out.ready ? Diagnostic::kProviderUnavailable
                             : DiagnosticFromProto(static_cast<int>(resp.diagnostic()));
  out.backend_fingerprint = resp.backend_fingerprint();
  out.provider = resp.provider();
  out.installation_id = resp.installation_id();
  out.limits = ProviderLimits{resp.max_active(), resp.max_retained()};
  if (resp.sandboxes_counted() && resp.sandboxes_active() >= 0 &&
      resp.sandboxes_retained() >= 0) {
    out.sandboxes = SandboxCounts{resp.sandboxes_active(), resp.sandboxes_retained()};
  }
  std::map<int64_t, GenerationReport> reports;
  for (const pb::GenerationReport& g : resp.generations()) {
    GenerationReport r;
    r.generation = g.generation();
    r.specification_digest = g.specification_digest();
    // FAILED, or a state this agent does not know: never usable.
    r.state = HeldStateFromProto(g.state()).value_or(HeldState::kFailed);
    if (r.state == HeldState::kFailed || r.state == HeldState::kNeedsRepair) {
      r.diagnostic = DiagnosticFromProto(static_cast<int>(g.diagnostic()));
    }
    if (r.generation > 0) reports[r.generation] = std::move(r);
  }
  for (auto& [g, r] : reports) out.generations.push_back(std::move(r));
  if (resp.has_figures()) out.figures = FiguresFrom(resp.figures());
  return out;
}

GrpcPrivhelperClient::GrpcPrivhelperClient(std::string socket_path, absl::Duration deadline,
                                           std::function<void(std::function<void()>)> post)
    : socket_path_(std::move(socket_path)),
      deadline_(deadline),
      post_(std::move(post)),
      worker_(std::make_unique<SerialWorker>()) {}

GrpcPrivhelperClient::~GrpcPrivhelperClient() = default;

void GrpcPrivhelperClient::Probe(int64_t generation,
                                 std::function<void(absl::StatusOr<ProbeOutcome>)> done) {
  worker_->Run([this, generation, done = std::move(done)]() mutable {
    absl::StatusOr<ProbeOutcome> outcome = ProbeOnce(socket_path_, generation, deadline_);
    post_([done = std::move(done), outcome = std::move(outcome)]() mutable {
      done(std::move(outcome));
    });
  });
}

}  // namespace sn::agent

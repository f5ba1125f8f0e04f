#include "agent/cli/enroll.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/connection/http_client.h"
#include "agent/generations/core_downloads.h"
#include "agent/generations/prepare.h"
#include "agent/generations/privhelper_preparation.h"
#include "agent/privhelper_rpc/deadlines.h"
#include "agent/privhelper_rpc/privhelper_client.h"
#include "agent/state/specification.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/progress_limiter.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"
#include "common/wire/validate.h"

namespace sn::agent {
namespace {

constexpr char kEnrollPath[] = "/api/v1/sandbox-node/enroll";

// Step 1, also before a resumed enrollment.
absl::StatusOr<ProbeOutcome> ProbePrivhelper(const AgentConfig& config) {
  absl::StatusOr<ProbeOutcome> probe = ProbeOnce(config.privhelper_socket, 0, kEnrollProbeDeadline);
  if (!probe.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot reach privhelper at ",
                                               config.privhelper_socket, ": ",
                                               probe.status().message()));
  }
  if (probe->provider.empty()) {
    return absl::FailedPreconditionError("privhelper did not name its provider");
  }
  if (!wire::IsUuid(probe->installation_id)) {
    return absl::FailedPreconditionError(
        "privhelper reported no valid installation identity (is it a current privhelper?)");
  }
  if (!LimitsInRange(probe->limits)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "privhelper reported limits outside the spec's ranges (max_active ",
        probe->limits.max_active, ", max_retained ", probe->limits.max_retained,
        "); is it a privhelper of this release?"));
  }
  return probe;
}

// The status `agent enroll` answers for a preparation that ended with `d`: what the
// operator should do (Unavailable: run it again; DataLoss: Core's specification is wrong;
// FailedPrecondition: fix the node first).
absl::Status PreparationFailure(Diagnostic d) {
  const std::string message = absl::StrCat(
      "Core enrolled the node, but its generation could not be prepared (",
      std::string(DiagnosticCode(d)),
      "; the agent's and privhelper's logs say why); run `agent enroll` again to finish");
  switch (d) {
    case Diagnostic::kConfigurationInvalid:
      return absl::DataLossError(message);
    case Diagnostic::kRuntimeDownloadFailed:
    case Diagnostic::kProviderUnavailable:
    case Diagnostic::kProviderStarting:
    case Diagnostic::kDaemonUnreachable:
    case Diagnostic::kPreparationTimeout:
    case Diagnostic::kPreparationCancelled:
      return absl::UnavailableError(message);
    default:
      return absl::FailedPreconditionError(message);
  }
}

// Step 4-5 for a node without generation management: the same preparation a running agent
// uses (generations/prepare.h), in place. Progress is logged at most every 5 s.
absl::Status PrepareEnrolledGeneration(const AgentConfig& config, const StateFiles& files,
                                       const NodeIdentity& identity,
                                       const std::string& credential) {
  HttpCoreDownloads core(config.origin, config.ca_bundle, credential);
  GrpcPrivhelperPreparation privhelper(config.privhelper_socket);
  PreparationContext context;
  context.core = &core;
  context.privhelper = &privhelper;
  context.release_key = &*config.release_key;
  context.provider = identity.provider;
  context.store_specification = [&files](int64_t generation, const std::string& bytes) {
    return files.WriteSpecification(generation, bytes);
  };
  // The same rate as `agent run`'s preparations (scheduler.h): each phase and artifact, then
  // every tenth of the bytes or 5 s, and the end.
  ProgressLimiter lines;
  const ProgressFn progress = [&](const PreparationProgress& p) {
    if (!lines.Due(SystemClock::Get()->Monotonic(), p.phase + "/" + p.artifact,
                   static_cast<uint64_t>(std::max<int64_t>(p.bytes_done, 0)),
                   static_cast<uint64_t>(std::max<int64_t>(p.bytes_total, 0)))) {
      return;
    }
    LogInfo("preparation progress", {{"generation", identity.deployment_generation},
                                     {"phase", p.phase},
                                     {"artifact", p.artifact},
                                     {"bytes_done", p.bytes_done},
                                     {"bytes_total", p.bytes_total}});
  };
  PreparationOutcome outcome = RunPreparation(
      context, GenerationRef{identity.deployment_generation, identity.specification_digest},
      nullptr, progress);
  if (outcome.failure.has_value()) return PreparationFailure(*outcome.failure);
  LogInfo("privhelper holds the enrolled generation",
          {{"generation", identity.deployment_generation}});
  return absl::OkStatus();
}

// Steps 4-7.
absl::Status FinishEnrollment(const AgentConfig& config, const StateFiles& files,
                              const NodeIdentity& identity, const std::string& credential) {
  if (!config.generation_management) {
    RETURN_IF_ERROR(PrepareEnrolledGeneration(config, files, identity, credential));
  } else {
    // Prepared only once a connection delivered deployment facts; the specification is
    // verified and kept now.
    absl::StatusOr<std::string> spec = FetchSpecification(config, identity, credential);
    if (!spec.ok()) {
      return absl::Status(spec.status().code(),
                          absl::StrCat("Core enrolled the node, but fetching its specification "
                                       "failed (run `agent enroll` again to finish): ",
                                       spec.status().message()));
    }
    RETURN_IF_ERROR(files.WriteSpecification(identity.deployment_generation, *spec));
  }
  RETURN_IF_ERROR(files.WriteIdentity(identity));
  RETURN_IF_ERROR(files.RemovePendingEnrollment());
  LogInfo("enrolled", {{"node_id", identity.node_id},
                       {"installation_id", identity.installation_id},
                       {"deployment_generation", identity.deployment_generation}});
  return absl::OkStatus();
}

absl::Status ResumeEnrollment(const AgentConfig& config, const StateFiles& files,
                              const NodeIdentity& pending) {
  LogInfo("finishing an interrupted enrollment (the token is not used again)",
          {{"node_id", pending.node_id}});
  absl::StatusOr<std::string> credential = files.ReadCredential();
  if (!credential.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "an interrupted enrollment has no usable credential; Core must forget installation ",
        pending.installation_id, " before this node can enroll again: ",
        credential.status().message()));
  }
  ASSIGN_OR_RETURN(ProbeOutcome probe, ProbePrivhelper(config));
  if (probe.installation_id != pending.installation_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "privhelper now owns installation ", probe.installation_id,
        " but the interrupted enrollment is for installation ", pending.installation_id));
  }
  return FinishEnrollment(config, files, pending,
                          std::string(absl::StripTrailingAsciiWhitespace(*credential)));
}

// The pending enrollment of a node that is not enrolled (nullopt when none is pending);
// FailedPrecondition for an enrolled node.
absl::StatusOr<std::optional<NodeIdentity>> PendingOfUnenrolled(const StateFiles& files) {
  RETURN_IF_ERROR(files.EnsureDirs());
  absl::StatusOr<NodeIdentity> enrolled = files.ReadIdentity();
  if (enrolled.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("this node is already enrolled as node ", enrolled->node_id));
  }
  if (!absl::IsNotFound(enrolled.status())) return enrolled.status();
  absl::StatusOr<NodeIdentity> pending = files.ReadPendingEnrollment();
  if (absl::IsNotFound(pending.status())) return std::optional<NodeIdentity>();
  if (!pending.ok()) return pending.status();
  return std::optional<NodeIdentity>(*std::move(pending));
}

}  // namespace

absl::StatusOr<std::string> FetchSpecification(const AgentConfig& config,
                                               const NodeIdentity& identity,
                                               const std::string& credential) {
  HttpCallSpec spec;
  spec.method = "GET";
  spec.target = ConfigurationTarget(identity.deployment_generation);
  spec.bearer = credential;
  spec.max_body_bytes = wire::kMaxHttpBodyBytes;
  ASSIGN_OR_RETURN(HttpResult r, HttpCall(config.origin, config.ca_bundle, spec));
  if (r.status == 401) {
    return absl::UnauthenticatedError(
        "Core rejected the node credential (HTTP 401) on the configuration route");
  }
  if (r.status != 200) {
    return absl::UnavailableError(
        absl::StrCat("the configuration route answered HTTP ", r.status));
  }
  ASSIGN_OR_RETURN(VerifiedSpecification verified,
                   VerifySpecification(std::move(r.body), identity));
  return std::move(verified.bytes);
}

absl::Status ResumePendingEnrollment(const AgentConfig& config) {
  StateFiles files(config.state_dir);
  ASSIGN_OR_RETURN(std::optional<NodeIdentity> pending, PendingOfUnenrolled(files));
  if (!pending.has_value()) {
    return absl::NotFoundError("no enrollment is pending (node/enrollment.json is absent)");
  }
  return ResumeEnrollment(config, files, *pending);
}

absl::StatusOr<wire::EnrollResponse> CallEnrollRoute(const Origin& origin,
                                                     const std::optional<std::string>& ca_bundle,
                                                     const wire::EnrollRequest& request) {
  HttpCallSpec call;
  call.method = "POST";
  call.target = kEnrollPath;
  call.body = wire::EncodeEnrollRequest(request);
  call.max_body_bytes = wire::kMaxHttpBodyBytes;
  ASSIGN_OR_RETURN(HttpResult r, HttpCall(origin, ca_bundle, call));
  if (r.status == 401) {
    return absl::UnauthenticatedError(
        "Core rejected the enrollment token (HTTP 401): it is wrong or was already used");
  }
  if (r.status == 409) {
    return absl::FailedPreconditionError(
        "Core says this installation is already enrolled (HTTP 409)");
  }
  if (r.status != 201) {
    return absl::UnavailableError(absl::StrCat("the enroll route answered HTTP ", r.status));
  }
  absl::StatusOr<wire::EnrollResponse> resp = wire::DecodeEnrollResponse(r.body);
  if (!resp.ok()) {
    return absl::DataLossError(
        absl::StrCat("Core's enroll response is invalid: ", resp.status().message()));
  }
  return resp;
}

absl::Status Enroll(const AgentConfig& config, const std::string& token) {
  if (token.empty()) return absl::InvalidArgumentError("the enrollment token is empty");
  StateFiles files(config.state_dir);
  ASSIGN_OR_RETURN(std::optional<NodeIdentity> pending, PendingOfUnenrolled(files));
  if (pending.has_value()) return ResumeEnrollment(config, files, *pending);

  ASSIGN_OR_RETURN(ProbeOutcome probe, ProbePrivhelper(config));
  if (!probe.ready) {
    LogWarning("the provider is not ready; enrolling anyway",
               {{"diagnostic", std::string(DiagnosticCode(probe.diagnostic))}});
  }
  wire::EnrollRequest req;
  req.enrollment_token = token;
  req.installation_id = probe.installation_id;
  req.provider = probe.provider;
  req.backend_fingerprint = probe.backend_fingerprint.substr(
      0, std::min(probe.backend_fingerprint.size(), wire::kMaxBackendFingerprintBytes));
  req.max_active = probe.limits.max_active;
  req.max_retained = probe.limits.max_retained;
  req.generation_management = config.generation_management;

  ASSIGN_OR_RETURN(wire::EnrollResponse resp,
                   CallEnrollRoute(config.origin, config.ca_bundle, req));
  NodeIdentity identity;
  identity.node_id = resp.node_id;
  identity.installation_id = probe.installation_id;
  identity.provider = probe.provider;
  identity.deployment_generation = resp.deployment_generation;
  identity.specification_digest = resp.specification_digest;
  identity.runtime_source = resp.runtime_source;
  identity.core_origin = config.origin.text;
  // Durable before anything else can fail, so that a later failure can be finished by running
  // enroll again (Core will not accept the token or the installation a second time).
  RETURN_IF_ERROR(files.WriteCredential(resp.credential));
  RETURN_IF_ERROR(files.WritePendingEnrollment(identity));
  return FinishEnrollment(config, files, identity, resp.credential);
}

}  // namespace sn::agent

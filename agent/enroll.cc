#include "agent/enroll.h"

#include <openssl/sha.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "agent/http_client.h"
#include "agent/privhelper_client.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"

namespace sn::agent {
namespace {

constexpr char kEnrollPath[] = "/api/v1/sandbox-node/enroll";
constexpr char kConfigurationPath[] = "/api/v1/sandbox-node/configuration";
// privhelper requires a positive generation; before enrollment the node knows none, and a
// single-provider privhelper probes its one provider whatever the number.
constexpr int64_t kEnrollProbeGeneration = 1;

}  // namespace

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  std::string hex;
  hex.reserve(2 * SHA256_DIGEST_LENGTH);
  for (unsigned char b : digest) {
    char buf[3];
    std::snprintf(buf, sizeof(buf), "%02x", b);
    hex.append(buf, 2);
  }
  return hex;
}

absl::Status FetchSpecification(const AgentConfig& config, const StateFiles& files,
                                const NodeIdentity& identity, const std::string& credential) {
  HttpCallSpec spec;
  spec.method = "GET";
  spec.target =
      absl::StrCat(kConfigurationPath, "?generation=", identity.deployment_generation);
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
  if (Sha256Hex(r.body) != identity.specification_digest) {
    return absl::DataLossError(
        "the specification's SHA-256 differs from the enrolled specification_digest");
  }
  absl::StatusOr<wire::SpecificationDocument> doc = wire::DecodeSpecificationDocument(r.body);
  if (!doc.ok()) {
    return absl::DataLossError(
        absl::StrCat("the specification document is invalid: ", doc.status().message()));
  }
  if (doc->generation != identity.deployment_generation) {
    return absl::DataLossError("the specification names another generation");
  }
  if (doc->provider != identity.provider) {
    return absl::DataLossError("the specification names another provider");
  }
  return WriteFileAtomically(files.SpecificationPath(identity.deployment_generation), r.body,
                             0600);
}

absl::Status Enroll(const AgentConfig& config, const std::string& token) {
  if (token.empty()) return absl::InvalidArgumentError("--token must not be empty");
  StateFiles files(config.state_dir);
  RETURN_IF_ERROR(files.EnsureDirs());

  absl::StatusOr<ProbeOutcome> probe =
      ProbeOnce(config.privhelper_socket, kEnrollProbeGeneration, absl::Seconds(15));
  if (!probe.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach privhelper at ", config.privhelper_socket, ": ",
                     probe.status().message()));
  }
  if (probe->provider.empty()) {
    return absl::FailedPreconditionError("privhelper did not name its provider");
  }
  // The installation identity is privhelper's (root-owned state); the agent never chooses it,
  // so the identity Core enrolls equals the labels privhelper puts on native objects.
  const std::string installation_id = probe->installation_id;
  if (!IsCanonicalUuid(installation_id)) {
    return absl::FailedPreconditionError(
        "privhelper reported no valid installation identity (is it a current privhelper?)");
  }
  if (!probe->ready) {
    LogWarning("the provider is not ready; enrolling anyway",
               {{"diagnostic", std::string(DiagnosticCode(probe->diagnostic))}});
  }

  wire::EnrollRequest req;
  req.enrollment_token = token;
  req.installation_id = installation_id;
  req.provider = probe->provider;
  req.backend_fingerprint = probe->backend_fingerprint.substr(
      0, std::min(probe->backend_fingerprint.size(), wire::kMaxBackendFingerprintBytes));
  req.max_active = config.max_active;
  req.max_retained = config.max_retained;
  req.generation_management = config.generation_management;

  HttpCallSpec call;
  call.method = "POST";
  call.target = kEnrollPath;
  call.body = wire::EncodeEnrollRequest(req);
  call.max_body_bytes = wire::kMaxHttpBodyBytes;
  ASSIGN_OR_RETURN(HttpResult r, HttpCall(config.origin, config.ca_bundle, call));
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

  NodeIdentity identity;
  identity.node_id = resp->node_id;
  identity.installation_id = installation_id;
  identity.provider = req.provider;
  identity.deployment_generation = resp->deployment_generation;
  identity.specification_digest = resp->specification_digest;
  identity.runtime_source = resp->runtime_source;
  identity.core_origin = config.origin.text;
  // The credential first: identity.json is what marks the node enrolled.
  RETURN_IF_ERROR(files.WriteCredential(resp->credential));
  RETURN_IF_ERROR(files.WriteIdentity(identity));
  LogInfo("enrolled", {{"node_id", identity.node_id},
                       {"installation_id", identity.installation_id},
                       {"deployment_generation", identity.deployment_generation}});

  absl::Status fetched = FetchSpecification(config, files, identity, resp->credential);
  if (!fetched.ok()) {
    return absl::Status(fetched.code(),
                        absl::StrCat("enrolled, but fetching the specification failed: ",
                                     fetched.message()));
  }
  LogInfo("specification verified and stored",
          {{"generation", identity.deployment_generation}});
  return absl::OkStatus();
}

}  // namespace sn::agent

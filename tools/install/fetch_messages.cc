// The typed messages of fetch_protocol.h: their encoders (each side's) and their strict
// decoders (root's for results, the child's for requests).
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/release/layout.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "tools/install/fetch_protocol.h"

namespace sn::install::fetchwire {
namespace {

constexpr size_t kMaxKindBytes = 16;  // an artifact kind, a provider code
constexpr size_t kMaxFingerprintBytes = wire::kMaxBackendFingerprintBytes;
constexpr size_t kMaxIdentityBytes = 7 + 64;  // "sha256:" + digest

// The common shape of every decoder of a result: the status, then the value when OK.
template <typename T, typename ReadValue>
absl::StatusOr<absl::StatusOr<T>> DecodeResult(std::string_view payload, ReadValue read) {
  FieldReader r(payload);
  absl::Status child;
  if (!GetStatus(r, &child)) {
    if (!r.status().ok()) return r.status();
    return OutOfProtocol("a malformed status");
  }
  if (!child.ok()) {
    RETURN_IF_ERROR(r.Finish());
    return absl::StatusOr<T>(child);
  }
  absl::StatusOr<T> value = read(r);
  if (!r.status().ok()) return r.status();
  if (!value.ok()) return value.status();  // a rule broken: already DataLoss
  RETURN_IF_ERROR(r.Finish());
  return absl::StatusOr<T>(*std::move(value));
}

void PutArtifact(FieldWriter& w, const wire::RuntimeArtifact& a) {
  w.Str(a.name).Str(a.kind).Str(a.sha256).I64(a.size);
}

// An artifact as the wire allows it (name, kind of the manifest or a specification, digest,
// non-negative size).
absl::StatusOr<wire::RuntimeArtifact> GetArtifact(FieldReader& r) {
  wire::RuntimeArtifact a;
  r.Str("artifact name", wire::kMaxArtifactNameBytes, &a.name);
  r.Str("artifact kind", kMaxKindBytes, &a.kind);
  r.Str("artifact sha256", 64, &a.sha256);
  r.I64("artifact size", &a.size);
  if (!r.status().ok()) return r.status();
  if (!wire::IsArtifactName(a.name)) return OutOfProtocol("an artifact name breaks its rule");
  if (!wire::IsManifestArtifactKind(a.kind)) return OutOfProtocol("an unknown artifact kind");
  if (!wire::IsDigest(a.sha256)) return OutOfProtocol("an artifact digest breaks its rule");
  if (a.size < 0) return OutOfProtocol("a negative artifact size");
  return a;
}

bool IsIdentity(std::string_view s) {
  return s.size() == kMaxIdentityBytes && s.substr(0, 7) == "sha256:" &&
         wire::IsDigest(s.substr(7));
}

}  // namespace

// ---- requests (the child decodes them; root wrote them) -----------------------------------

std::string EncodeConfigurationRequest(const ConfigurationRequest& r) {
  return FieldWriter()
      .Str(r.credential)
      .I64(r.generation)
      .Str(r.specification_digest)
      .Str(r.provider)
      .Take();
}

absl::StatusOr<ConfigurationRequest> DecodeConfigurationRequest(std::string_view payload) {
  FieldReader r(payload);
  ConfigurationRequest c;
  r.Str("credential", wire::kMaxOpaqueBytes, &c.credential);
  r.I64("generation", &c.generation);
  r.Str("specification digest", 64, &c.specification_digest);
  r.Str("provider", 64, &c.provider);
  RETURN_IF_ERROR(r.Finish());
  return c;
}

std::string EncodeArtifactRequest(const ArtifactRequest& r) {
  FieldWriter w;
  w.Str(r.source);
  PutArtifact(w, r.artifact);
  return w.Take();
}

absl::StatusOr<ArtifactRequest> DecodeArtifactRequest(std::string_view payload) {
  FieldReader r(payload);
  ArtifactRequest a;
  r.Str("source", wire::kMaxReleaseSourceBytes, &a.source);
  ASSIGN_OR_RETURN(a.artifact, GetArtifact(r));
  RETURN_IF_ERROR(r.Finish());
  if (!wire::IsReleaseSourceName(a.source)) return OutOfProtocol("a release source breaks its rule");
  return a;
}

std::string EncodeEnrollRequest(const wire::EnrollRequest& r) {
  return FieldWriter()
      .Str(r.enrollment_token)
      .Str(r.installation_id)
      .Str(r.provider)
      .Str(r.backend_fingerprint)
      .I64(r.max_active)
      .I64(r.max_retained)
      .U64(r.generation_management ? 1 : 0)
      .Take();
}

absl::StatusOr<wire::EnrollRequest> DecodeEnrollRequest(std::string_view payload) {
  FieldReader r(payload);
  wire::EnrollRequest e;
  uint64_t management = 0;
  r.Str("enrollment token", wire::kMaxOpaqueBytes, &e.enrollment_token);
  r.Str("installation id", 36, &e.installation_id);
  r.Str("provider", 64, &e.provider);
  r.Str("backend fingerprint", kMaxFingerprintBytes, &e.backend_fingerprint);
  r.I64("max active", &e.max_active);
  r.I64("max retained", &e.max_retained);
  r.U64("generation management", &management);
  RETURN_IF_ERROR(r.Finish());
  e.generation_management = management != 0;
  return e;
}

// ---- results (root decodes them; the child wrote them) -----------------------------------

std::string EncodeStatusResult(const absl::Status& s) {
  FieldWriter w;
  PutStatus(w, s);
  return w.Take();
}

std::string EncodeCurrentResult(const std::string& source) {
  FieldWriter w;
  PutStatus(w, absl::OkStatus());
  w.Str(source);
  return w.Take();
}

std::string EncodeMetadataResult(const MetadataFiles& files) {
  FieldWriter w;
  PutStatus(w, absl::OkStatus());
  w.Str(files.manifest).Str(files.signature).Str(files.sums);
  return w.Take();
}

std::string EncodeEnrollResult(const wire::EnrollResponse& e) {
  FieldWriter w;
  PutStatus(w, absl::OkStatus());
  w.Str(e.node_id)
      .Str(e.credential)
      .I64(e.deployment_generation)
      .Str(e.specification_digest)
      .Str(e.runtime_source);
  return w.Take();
}

std::string EncodeConfigurationResult(const wire::SpecificationDocument& d) {
  FieldWriter w;
  PutStatus(w, absl::OkStatus());
  w.I64(d.generation).Str(d.provider).Str(d.runtime_source);
  w.U64(d.artifacts.size());
  for (const wire::RuntimeArtifact& a : d.artifacts) PutArtifact(w, a);
  w.U64(d.images.size());
  for (const wire::SpecImage& img : d.images) {
    w.Str(img.name).Str(img.artifact).U64(img.identities.size());
    for (const std::string& id : img.identities) w.Str(id);
  }
  return w.Take();
}

absl::Status DecodeStatusResult(std::string_view payload, absl::Status* child) {
  FieldReader r(payload);
  if (!GetStatus(r, child)) {
    if (!r.status().ok()) return r.status();
    return OutOfProtocol("a malformed status");
  }
  return r.Finish();
}

absl::StatusOr<absl::StatusOr<std::string>> DecodeCurrentResult(std::string_view payload) {
  return DecodeResult<std::string>(payload, [](FieldReader& r) -> absl::StatusOr<std::string> {
    std::string source;
    if (!r.Str("source", wire::kMaxReleaseSourceBytes, &source)) return r.status();
    if (!wire::IsReleaseSourceName(source)) return OutOfProtocol("a release source breaks its rule");
    return source;
  });
}

absl::StatusOr<absl::StatusOr<MetadataFiles>> DecodeMetadataResult(std::string_view payload) {
  return DecodeResult<MetadataFiles>(payload, [](FieldReader& r) -> absl::StatusOr<MetadataFiles> {
    MetadataFiles f;
    r.Str("manifest", release::kMaxManifestBytes, &f.manifest);
    r.Str("signature", release::kMaxSignatureFileBytes, &f.signature);
    r.Str("sums", release::kMaxSumsBytes, &f.sums);
    if (!r.status().ok()) return r.status();
    return f;  // root verifies these bytes itself (fetcher.cc)
  });
}

absl::StatusOr<absl::StatusOr<wire::EnrollResponse>> DecodeEnrollResult(
    std::string_view payload) {
  return DecodeResult<wire::EnrollResponse>(
      payload, [](FieldReader& r) -> absl::StatusOr<wire::EnrollResponse> {
        wire::EnrollResponse e;
        r.Str("node id", 36, &e.node_id);
        r.Str("credential", wire::kMaxOpaqueBytes, &e.credential);
        r.I64("deployment generation", &e.deployment_generation);
        r.Str("specification digest", 64, &e.specification_digest);
        r.Str("runtime source", wire::kMaxReleaseSourceBytes, &e.runtime_source);
        if (!r.status().ok()) return r.status();
        if (!wire::IsUuid(e.node_id)) return OutOfProtocol("the node id is not a uuid");
        if (e.credential.empty() || !wire::IsWireString(e.credential, wire::kMaxOpaqueBytes)) {
          return OutOfProtocol("the credential breaks its rule");
        }
        if (e.deployment_generation <= 0) return OutOfProtocol("the generation is not positive");
        if (!wire::IsDigest(e.specification_digest)) {
          return OutOfProtocol("the specification digest breaks its rule");
        }
        if (!wire::IsReleaseSourceName(e.runtime_source)) {
          return OutOfProtocol("the runtime source breaks its rule");
        }
        return e;
      });
}

absl::StatusOr<absl::StatusOr<wire::SpecificationDocument>> DecodeConfigurationResult(
    std::string_view payload) {
  return DecodeResult<wire::SpecificationDocument>(
      payload, [](FieldReader& r) -> absl::StatusOr<wire::SpecificationDocument> {
        wire::SpecificationDocument d;
        uint64_t artifacts = 0, images = 0;
        r.I64("generation", &d.generation);
        r.Str("provider", 64, &d.provider);
        r.Str("runtime source", wire::kMaxReleaseSourceBytes, &d.runtime_source);
        if (!r.U64("artifact count", &artifacts)) return r.status();
        if (artifacts > wire::kMaxRuntimeArtifacts) return OutOfProtocol("too many artifacts");
        for (uint64_t i = 0; i < artifacts; ++i) {
          ASSIGN_OR_RETURN(wire::RuntimeArtifact a, GetArtifact(r));
          d.artifacts.push_back(std::move(a));
        }
        if (!r.U64("image count", &images)) return r.status();
        if (images < wire::kMinSpecImages || images > wire::kMaxSpecImages) {
          return OutOfProtocol("an image count out of bounds");
        }
        for (uint64_t i = 0; i < images; ++i) {
          wire::SpecImage img;
          uint64_t identities = 0;
          r.Str("image name", wire::kMaxImageNameBytes, &img.name);
          r.Str("image artifact", wire::kMaxArtifactNameBytes, &img.artifact);
          if (!r.U64("identity count", &identities)) return r.status();
          if (identities < wire::kMinImageIdentities || identities > wire::kMaxImageIdentities) {
            return OutOfProtocol("an identity count out of bounds");
          }
          for (uint64_t j = 0; j < identities; ++j) {
            std::string id;
            if (!r.Str("image identity", kMaxIdentityBytes, &id)) return r.status();
            if (!IsIdentity(id)) return OutOfProtocol("an image identity breaks its rule");
            img.identities.push_back(std::move(id));
          }
          if (!wire::IsWireString(img.name, wire::kMaxImageNameBytes) || img.name.empty() ||
              !wire::IsArtifactName(img.artifact)) {
            return OutOfProtocol("an image breaks its rule");
          }
          d.images.push_back(std::move(img));
        }
        if (!r.status().ok()) return r.status();
        // The cross-member rules of the specification's decoder, again at root: names unique,
        // each image's artifact one of kind "image".
        for (size_t i = 0; i < d.artifacts.size(); ++i) {
          for (size_t j = 0; j < i; ++j) {
            if (d.artifacts[j].name == d.artifacts[i].name) {
              return OutOfProtocol("artifact names are not unique");
            }
          }
        }
        for (size_t i = 0; i < d.images.size(); ++i) {
          bool found = false;
          for (size_t j = 0; j < d.images.size(); ++j) {
            if (j != i && d.images[j].name == d.images[i].name) {
              return OutOfProtocol("image names are not unique");
            }
          }
          for (const wire::RuntimeArtifact& a : d.artifacts) {
            found = found || (a.name == d.images[i].artifact && a.kind == "image");
          }
          if (!found) return OutOfProtocol("an image names no artifact of kind image");
        }
        if (d.generation <= 0 || !wire::IsCode(d.provider) ||
            !wire::IsReleaseSourceName(d.runtime_source)) {
          return OutOfProtocol("the specification's generation, provider or source breaks its rule");
        }
        return d;
      });
}

}  // namespace sn::install::fetchwire

// Strict decoders and encoders of the machine connection API bodies (spec/wire.md §6).
#include "common/wire/http_bodies.h"

#include <string_view>

#include "common/json/writer.h"
#include "common/wire/decode_util.h"
#include "common/wire/limits.h"
#include "common/wire/validate.h"

namespace sn::wire {
namespace {

using internal::ForEachElement;
using internal::ForEachMember;
using internal::Invalid;
using internal::Members;
using internal::Path;
using json::Reader;

// Rev 5 adds "guest_agent": the program a microVM guest runs as its first process.
constexpr std::string_view kSpecKinds[] = {"helper", "guest_agent", "firmware",
                                           "kernel", "seccomp",     "image"};
// Rev 4 adds "native_helper": the host program's own native helper, used by a generation
// whose specification names no "helper" artifact.
constexpr std::string_view kManifestKinds[] = {"agent",   "privhelper",  "native_helper",
                                               "preparer", "helper",     "guest_agent",
                                               "firmware", "kernel",     "seccomp",
                                               "image"};

// The members of each body and nested object, in the order of spec/wire.md §6 (the order only
// decides the order in which missing members are listed).
#define SN_ARTIFACT_MEMBERS(M) \
  M(kName, "name") M(kKind, "kind") M(kSha256, "sha256") M(kSize, "size")
SN_WIRE_MEMBERS(ArtifactMember, SN_ARTIFACT_MEMBERS)

#define SN_IMAGE_MEMBERS(M) M(kName, "name") M(kArtifact, "artifact") M(kIdentities, "identities")
SN_WIRE_MEMBERS(ImageMember, SN_IMAGE_MEMBERS)

#define SN_ENROLL_REQUEST_MEMBERS(M)                                                     \
  M(kEnrollmentToken, "enrollment_token") M(kInstallationId, "installation_id")          \
  M(kProvider, "provider") M(kBackendFingerprint, "backend_fingerprint")                 \
  M(kMaxActive, "max_active") M(kMaxRetained, "max_retained")                            \
  M(kGenerationManagement, "generation_management")
SN_WIRE_MEMBERS(EnrollRequestMember, SN_ENROLL_REQUEST_MEMBERS)

#define SN_ENROLL_RESPONSE_MEMBERS(M)                                                    \
  M(kNodeId, "node_id") M(kCredential, "credential")                                     \
  M(kDeploymentGeneration, "deployment_generation")                                      \
  M(kSpecificationDigest, "specification_digest") M(kRuntimeSource, "runtime_source")
SN_WIRE_MEMBERS(EnrollResponseMember, SN_ENROLL_RESPONSE_MEMBERS)

#define SN_SPECIFICATION_MEMBERS(M)                                                      \
  M(kSchema, "schema") M(kGeneration, "generation") M(kProvider, "provider")             \
  M(kRuntime, "runtime") M(kImages, "images")
SN_WIRE_MEMBERS(SpecificationMember, SN_SPECIFICATION_MEMBERS)

#define SN_RUNTIME_MEMBERS(M) M(kSource, "source") M(kArtifacts, "artifacts")
SN_WIRE_MEMBERS(RuntimeMember, SN_RUNTIME_MEMBERS)

#define SN_MANIFEST_MEMBERS(M)                                                           \
  M(kSchema, "schema") M(kSource, "source") M(kPublishedAt, "published_at")              \
  M(kArtifacts, "artifacts")
SN_WIRE_MEMBERS(ManifestMember, SN_MANIFEST_MEMBERS)

#define SN_CURRENT_RELEASE_MEMBERS(M) M(kSource, "source")
SN_WIRE_MEMBERS(CurrentReleaseMember, SN_CURRENT_RELEASE_MEMBERS)


// Runs `fn` over the whole body: size limit, one top-level object, only whitespace after it.
template <typename Fn>
absl::Status DecodeBody(std::string_view body, Fn&& fn) {
  if (body.size() > kMaxHttpBodyBytes) {
    return absl::ResourceExhaustedError("body of " + std::to_string(body.size()) +
                                        " bytes exceeds the limit of " +
                                        std::to_string(kMaxHttpBodyBytes) + " bytes");
  }
  Reader r(body);
  RETURN_IF_ERROR(fn(r));
  return r.Finish();
}

absl::StatusOr<std::string> ReadOpaque(Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(std::string s, internal::ReadBoundedString(r, p, kMaxOpaqueBytes));
  if (s.empty()) return Invalid(p, "empty");
  return s;
}

absl::StatusOr<std::string> ReadNamed(Reader& r, const Path& p, bool (*valid)(std::string_view),
                                      std::string_view rule) {
  ASSIGN_OR_RETURN(std::string_view s, internal::ReadString(r, p));
  if (!valid(s)) return Invalid(p, "not " + std::string(rule));
  return std::string(s);
}

absl::Status DecodeArtifacts(Reader& r, const Path& p, size_t min, size_t max,
                             absl::Span<const std::string_view> kinds,
                             std::vector<RuntimeArtifact>* out) {
  RETURN_IF_ERROR(ForEachElement(r, p, min, max, [&](Reader& e, const Path& ep) -> absl::Status {
    using enum ArtifactMember;
    Members<ArtifactMember> t(ep);
    RuntimeArtifact a;
    RETURN_IF_ERROR(
        ForEachMember(e, ep, t, [&](ArtifactMember m, Reader& v, const Path& mp) -> absl::Status {
          switch (m) {
            case kName: {
              ASSIGN_OR_RETURN(a.name, ReadNamed(v, mp, IsArtifactName, "an artifact name"));
              break;
            }
            case kKind: {
              ASSIGN_OR_RETURN(int k, internal::ReadEnum(v, mp, kinds));
              a.kind = std::string(kinds[static_cast<size_t>(k)]);
              break;
            }
            case kSha256: {
              ASSIGN_OR_RETURN(a.sha256, internal::ReadDigest(v, mp));
              break;
            }
            case kSize: {
              ASSIGN_OR_RETURN(a.size, internal::ReadInt64InRange(v, mp, 0, INT64_MAX));
              break;
            }
          }
          return absl::OkStatus();
        }));
    RETURN_IF_ERROR(t.Require({kName, kKind, kSha256, kSize}));
    out->push_back(std::move(a));
    return absl::OkStatus();
  }));
  for (size_t i = 0; i < out->size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if ((*out)[i].name == (*out)[j].name) return Invalid(p, "artifact names are not unique");
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeImages(Reader& r, const Path& p, std::vector<SpecImage>* out) {
  return ForEachElement(
      r, p, kMinSpecImages, kMaxSpecImages, [&](Reader& e, const Path& ep) -> absl::Status {
        using enum ImageMember;
        Members<ImageMember> t(ep);
        SpecImage img;
        RETURN_IF_ERROR(
            ForEachMember(e, ep, t, [&](ImageMember m, Reader& v, const Path& mp) -> absl::Status {
              switch (m) {
                case kName: {
                  ASSIGN_OR_RETURN(img.name,
                                   internal::ReadBoundedString(v, mp, kMaxImageNameBytes));
                  break;
                }
                case kArtifact: {
                  ASSIGN_OR_RETURN(img.artifact,
                                   ReadNamed(v, mp, IsArtifactName, "an artifact name"));
                  break;
                }
                case kIdentities:
                  return ForEachElement(
                      v, mp, kMinImageIdentities, kMaxImageIdentities,
                      [&](Reader& ie, const Path& ip) -> absl::Status {
                        ASSIGN_OR_RETURN(std::string_view s, internal::ReadString(ie, ip));
                        if (s.substr(0, 7) != "sha256:" || !IsDigest(s.substr(7))) {
                          return Invalid(ip, "not \"sha256:\" followed by a digest");
                        }
                        img.identities.emplace_back(s);
                        return absl::OkStatus();
                      });
              }
              return absl::OkStatus();
            }));
        RETURN_IF_ERROR(t.Require({kName, kArtifact, kIdentities}));
        out->push_back(std::move(img));
        return absl::OkStatus();
      });
}

void WriteArtifacts(json::Writer& w, const std::vector<RuntimeArtifact>& artifacts) {
  w.BeginArray();
  for (const RuntimeArtifact& a : artifacts) {
    w.BeginObject();
    w.Key("name"); w.String(a.name);
    w.Key("kind"); w.String(a.kind);
    w.Key("sha256"); w.String(a.sha256);
    w.Key("size"); w.Int(a.size);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

bool IsReleaseSourceName(std::string_view s) { return IsReleaseSource(s) && s != "current"; }

bool IsManifestArtifactKind(std::string_view kind) {
  for (std::string_view k : kManifestKinds) {
    if (k == kind) return true;
  }
  return false;
}

absl::StatusOr<EnrollRequest> DecodeEnrollRequest(std::string_view json) {
  using enum EnrollRequestMember;
  const Path p = internal::Root("enroll_request");
  EnrollRequest e;
  RETURN_IF_ERROR(DecodeBody(json, [&](Reader& r) -> absl::Status {
    Members<EnrollRequestMember> t(p);
    RETURN_IF_ERROR(ForEachMember(
        r, p, t, [&](EnrollRequestMember m, Reader& v, const Path& mp) -> absl::Status {
          switch (m) {
            case kEnrollmentToken: {
              ASSIGN_OR_RETURN(e.enrollment_token, ReadOpaque(v, mp));
              break;
            }
            case kInstallationId: {
              ASSIGN_OR_RETURN(e.installation_id, internal::ReadUuid(v, mp));
              break;
            }
            case kProvider: {
              ASSIGN_OR_RETURN(e.provider, internal::ReadCode(v, mp));
              break;
            }
            case kBackendFingerprint: {
              ASSIGN_OR_RETURN(e.backend_fingerprint,
                               internal::ReadBoundedString(v, mp, kMaxBackendFingerprintBytes));
              break;
            }
            case kMaxActive: {
              ASSIGN_OR_RETURN(e.max_active,
                               internal::ReadInt64InRange(v, mp, kMinMaxActive, kMaxMaxActive));
              break;
            }
            case kMaxRetained: {
              ASSIGN_OR_RETURN(e.max_retained,
                               internal::ReadInt64InRange(v, mp, kMinMaxRetained, kMaxMaxRetained));
              break;
            }
            case kGenerationManagement: {
              ASSIGN_OR_RETURN(e.generation_management, internal::ReadBool(v, mp));
              break;
            }
          }
          return absl::OkStatus();
        }));
    return t.Require({kEnrollmentToken, kInstallationId, kProvider, kBackendFingerprint,
                      kMaxActive, kMaxRetained, kGenerationManagement});
  }));
  return e;
}

std::string EncodeEnrollRequest(const EnrollRequest& e) {
  json::Writer w;
  w.BeginObject();
  w.Key("enrollment_token"); w.String(e.enrollment_token);
  w.Key("installation_id"); w.String(e.installation_id);
  w.Key("provider"); w.String(e.provider);
  w.Key("backend_fingerprint"); w.String(e.backend_fingerprint);
  w.Key("max_active"); w.Int(e.max_active);
  w.Key("max_retained"); w.Int(e.max_retained);
  w.Key("generation_management"); w.Bool(e.generation_management);
  w.EndObject();
  return w.Take();
}

absl::StatusOr<EnrollResponse> DecodeEnrollResponse(std::string_view json) {
  using enum EnrollResponseMember;
  const Path p = internal::Root("enroll_response");
  EnrollResponse e;
  RETURN_IF_ERROR(DecodeBody(json, [&](Reader& r) -> absl::Status {
    Members<EnrollResponseMember> t(p);
    RETURN_IF_ERROR(ForEachMember(
        r, p, t, [&](EnrollResponseMember m, Reader& v, const Path& mp) -> absl::Status {
          switch (m) {
            case kNodeId: {
              ASSIGN_OR_RETURN(e.node_id, internal::ReadUuid(v, mp));
              break;
            }
            case kCredential: {
              ASSIGN_OR_RETURN(e.credential, ReadOpaque(v, mp));
              break;
            }
            case kDeploymentGeneration: {
              ASSIGN_OR_RETURN(e.deployment_generation, internal::ReadPositive(v, mp));
              break;
            }
            case kSpecificationDigest: {
              ASSIGN_OR_RETURN(e.specification_digest, internal::ReadDigest(v, mp));
              break;
            }
            case kRuntimeSource: {
              ASSIGN_OR_RETURN(e.runtime_source,
                               ReadNamed(v, mp, IsReleaseSourceName,
                                         "a release source name other than \"current\""));
              break;
            }
          }
          return absl::OkStatus();
        }));
    return t.Require({kNodeId, kCredential, kDeploymentGeneration, kSpecificationDigest,
                      kRuntimeSource});
  }));
  return e;
}

std::string EncodeEnrollResponse(const EnrollResponse& e) {
  json::Writer w;
  w.BeginObject();
  w.Key("node_id"); w.String(e.node_id);
  w.Key("credential"); w.String(e.credential);
  w.Key("deployment_generation"); w.Int(e.deployment_generation);
  w.Key("specification_digest"); w.String(e.specification_digest);
  w.Key("runtime_source"); w.String(e.runtime_source);
  w.EndObject();
  return w.Take();
}

absl::StatusOr<SpecificationDocument> DecodeSpecificationDocument(std::string_view json) {
  using enum SpecificationMember;
  const Path p = internal::Root("specification");
  SpecificationDocument d;
  RETURN_IF_ERROR(DecodeBody(json, [&](Reader& r) -> absl::Status {
    Members<SpecificationMember> t(p);
    RETURN_IF_ERROR(ForEachMember(
        r, p, t, [&](SpecificationMember m, Reader& v, const Path& mp) -> absl::Status {
          switch (m) {
            case kSchema: return internal::ReadVersionOne(v, mp);
            case kGeneration: {
              ASSIGN_OR_RETURN(d.generation, internal::ReadPositive(v, mp));
              break;
            }
            case kProvider: {
              ASSIGN_OR_RETURN(d.provider, internal::ReadCode(v, mp));
              break;
            }
            case kRuntime: {
              Members<RuntimeMember> rt(mp);
              RETURN_IF_ERROR(ForEachMember(
                  v, mp, rt, [&](RuntimeMember k, Reader& rv, const Path& rp) -> absl::Status {
                    switch (k) {
                      case RuntimeMember::kSource: {
                        ASSIGN_OR_RETURN(d.runtime_source,
                                         ReadNamed(rv, rp, IsReleaseSourceName,
                                                   "a release source name other than \"current\""));
                        return absl::OkStatus();
                      }
                      case RuntimeMember::kArtifacts:
                        return DecodeArtifacts(rv, rp, 0, kMaxRuntimeArtifacts, kSpecKinds,
                                               &d.artifacts);
                    }
                    return absl::OkStatus();
                  }));
              return rt.Require({RuntimeMember::kSource, RuntimeMember::kArtifacts});
            }
            case kImages: return DecodeImages(v, mp, &d.images);
          }
          return absl::OkStatus();
        }));
    return t.Require({kSchema, kGeneration, kProvider, kRuntime, kImages});
  }));
  const Path images_path = p.Member("images");
  for (size_t i = 0; i < d.images.size(); ++i) {
    const Path ip = images_path.Element(static_cast<int>(i));
    for (size_t j = 0; j < i; ++j) {
      if (d.images[j].name == d.images[i].name) return Invalid(ip, "image names are not unique");
    }
    bool found = false;
    for (const RuntimeArtifact& a : d.artifacts) {
      found = found || (a.name == d.images[i].artifact && a.kind == "image");
    }
    if (!found)
      return Invalid(ip.Member("artifact"), "names no runtime artifact of kind \"image\"");
  }
  return d;
}

std::string EncodeSpecificationDocument(const SpecificationDocument& d) {
  json::Writer w;
  w.BeginObject();
  w.Key("schema"); w.Int(1);
  w.Key("generation"); w.Int(d.generation);
  w.Key("provider"); w.String(d.provider);
  w.Key("runtime");
  w.BeginObject();
  w.Key("source"); w.String(d.runtime_source);
  w.Key("artifacts"); WriteArtifacts(w, d.artifacts);
  w.EndObject();
  w.Key("images");
  w.BeginArray();
  for (const SpecImage& img : d.images) {
    w.BeginObject();
    w.Key("name"); w.String(img.name);
    w.Key("artifact"); w.String(img.artifact);
    w.Key("identities");
    w.BeginArray();
    for (const std::string& id : img.identities) w.String(id);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

absl::StatusOr<ReleaseManifest> DecodeReleaseManifest(std::string_view json) {
  using enum ManifestMember;
  const Path p = internal::Root("manifest");
  ReleaseManifest m;
  RETURN_IF_ERROR(DecodeBody(json, [&](Reader& r) -> absl::Status {
    Members<ManifestMember> t(p);
    RETURN_IF_ERROR(
        ForEachMember(r, p, t, [&](ManifestMember mm, Reader& v, const Path& mp) -> absl::Status {
          switch (mm) {
            case kSchema: return internal::ReadVersionOne(v, mp);
            case kSource: {
              ASSIGN_OR_RETURN(m.source, ReadNamed(v, mp, IsReleaseSourceName,
                                                   "a release source name other than \"current\""));
              break;
            }
            case kPublishedAt: {
              ASSIGN_OR_RETURN(m.published_at, internal::ReadTimestamp(v, mp));
              break;
            }
            case kArtifacts:
              return DecodeArtifacts(v, mp, 1, kMaxManifestArtifacts, kManifestKinds, &m.artifacts);
          }
          return absl::OkStatus();
        }));
    return t.Require({kSchema, kSource, kPublishedAt, kArtifacts});
  }));
  return m;
}

std::string EncodeReleaseManifest(const ReleaseManifest& m) {
  json::Writer w;
  w.BeginObject();
  w.Key("schema"); w.Int(1);
  w.Key("source"); w.String(m.source);
  w.Key("published_at"); w.String(m.published_at);
  w.Key("artifacts"); WriteArtifacts(w, m.artifacts);
  w.EndObject();
  return w.Take();
}

absl::StatusOr<CurrentRelease> DecodeCurrentRelease(std::string_view json) {
  using enum CurrentReleaseMember;
  const Path p = internal::Root("current_release");
  CurrentRelease c;
  RETURN_IF_ERROR(DecodeBody(json, [&](Reader& r) -> absl::Status {
    Members<CurrentReleaseMember> t(p);
    RETURN_IF_ERROR(ForEachMember(
        r, p, t, [&](CurrentReleaseMember m, Reader& v, const Path& mp) -> absl::Status {
          switch (m) {
            case kSource: {
              ASSIGN_OR_RETURN(c.source, ReadNamed(v, mp, IsReleaseSourceName,
                                                   "a release source name other than \"current\""));
              break;
            }
          }
          return absl::OkStatus();
        }));
    return t.Require({kSource});
  }));
  return c;
}

std::string EncodeCurrentRelease(const CurrentRelease& c) {
  json::Writer w;
  w.BeginObject();
  w.Key("source"); w.String(c.source);
  w.EndObject();
  return w.Take();
}

}  // namespace sn::wire

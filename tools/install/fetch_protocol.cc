#include "tools/install/fetch_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/release/failure.h"
#include "common/release/layout.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"

namespace sn::install::fetchwire {
namespace {

constexpr size_t kHeaderBytes = 4;
constexpr size_t kMaxKindBytes = 16;        // an artifact kind, a provider code
constexpr size_t kMaxFingerprintBytes = wire::kMaxBackendFingerprintBytes;
constexpr size_t kMaxIdentityBytes = 7 + 64;  // "sha256:" + digest

bool KnownKind(uint8_t k) {
  return k >= static_cast<uint8_t>(Kind::kReady) && k <= static_cast<uint8_t>(Kind::kResult);
}

// Debian's Abseil has its own string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Protocol(std::string_view what) {
  return absl::DataLossError(absl::StrCat("out of protocol: ", Av(what)));
}

// Reads exactly `n` bytes, each wait bounded by `deadline`. `started` says whether a frame
// has begun (EOF is then a truncation, not the end of the stream).
absl::Status ReadExactly(int fd, char* buf, size_t n, absl::Time deadline, bool started) {
  size_t got = 0;
  while (got < n) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("no answer in time");
    pollfd p{fd, POLLIN, 0};
    // -1 (no timeout) for an infinite deadline: the child waits for root's next request.
    const int ms = left == absl::InfiniteDuration()
                       ? -1
                       : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left),
                                                            int64_t{1} << 30) + 1);
    int rc = poll(&p, 1, ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return ErrnoStatus(errno, "poll");
    if (rc == 0) continue;  // the loop re-checks the deadline
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r < 0) return ErrnoStatus(errno, "read");
    if (r == 0) {
      if (!started && got == 0) return absl::OutOfRangeError("end of stream");
      return Protocol("a frame cut short");
    }
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

bool Printable(char c) { return c >= 0x20 && c < 0x7f; }

}  // namespace

size_t MaxResultBytes() {
  // status (code, class, message) + three strings of metadata, each with its length.
  return 64 + kMaxMessageBytes + release::kMaxManifestBytes + release::kMaxSignatureFileBytes +
         release::kMaxSumsBytes + 64;
}

absl::Status WriteFrame(int fd, Kind kind, std::string_view payload) {
  const uint32_t n = static_cast<uint32_t>(payload.size() + 1);
  std::string frame;
  frame.reserve(kHeaderBytes + n);
  for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>(n >> shift));
  frame.push_back(static_cast<char>(kind));
  frame.append(payload);
  std::string_view rest = frame;
  while (!rest.empty()) {
    ssize_t w = send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ErrnoStatus(errno, "write a frame");
    rest.remove_prefix(static_cast<size_t>(w));
  }
  return absl::OkStatus();
}

absl::StatusOr<Frame> ReadFrame(int fd, size_t max_bytes, absl::Time deadline) {
  unsigned char header[kHeaderBytes];
  absl::Status s = ReadExactly(fd, reinterpret_cast<char*>(header), kHeaderBytes, deadline, false);
  if (!s.ok()) return s;
  const uint32_t n = (uint32_t{header[0]} << 24) | (uint32_t{header[1]} << 16) |
                     (uint32_t{header[2]} << 8) | uint32_t{header[3]};
  if (n == 0) return Protocol("an empty frame");
  if (n > max_bytes) {
    return Protocol(absl::StrCat("a frame of ", n, " bytes (at most ", max_bytes, " here)"));
  }
  std::string body(n, '\0');
  s = ReadExactly(fd, body.data(), n, deadline, true);
  if (!s.ok()) return s;
  const uint8_t k = static_cast<uint8_t>(body[0]);
  if (!KnownKind(k)) return Protocol(absl::StrCat("a frame of unknown kind ", k));
  Frame f;
  f.kind = static_cast<Kind>(k);
  f.payload = body.substr(1);
  return f;
}

FieldWriter& FieldWriter::U64(uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out_.push_back(static_cast<char>(v >> shift));
  return *this;
}

FieldWriter& FieldWriter::Str(std::string_view s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  for (int shift = 24; shift >= 0; shift -= 8) out_.push_back(static_cast<char>(n >> shift));
  out_.append(s);
  return *this;
}

bool FieldReader::Fail(std::string_view field, std::string_view why) {
  if (status_.ok()) status_ = Protocol(absl::StrCat(Av(field), ": ", Av(why)));
  return false;
}

bool FieldReader::U64(std::string_view field, uint64_t* out) {
  if (!status_.ok()) return false;
  if (in_.size() < 8) return Fail(field, "cut short");
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in_[i]);
  in_.remove_prefix(8);
  *out = v;
  return true;
}

bool FieldReader::I64(std::string_view field, int64_t* out) {
  uint64_t v = 0;
  if (!U64(field, &v)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

bool FieldReader::Str(std::string_view field, size_t max_bytes, std::string* out) {
  if (!status_.ok()) return false;
  if (in_.size() < 4) return Fail(field, "cut short");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(in_[i]);
  if (n > max_bytes) return Fail(field, absl::StrCat(n, " bytes, at most ", max_bytes));
  if (in_.size() - 4 < n) return Fail(field, "cut short");
  out->assign(in_.substr(4, n));
  in_.remove_prefix(4 + n);
  return true;
}

absl::Status FieldReader::Finish() {
  if (status_.ok() && !in_.empty()) status_ = Protocol("trailing bytes");
  return status_;
}

// ---- status ------------------------------------------------------------------------------

void PutStatus(FieldWriter& w, const absl::Status& s) {
  uint64_t failure = 0;
  if (std::optional<release::FailureClass> c = release::FailureClassOf(s); c.has_value()) {
    failure = 1 + static_cast<uint64_t>(*c);
  }
  std::string_view message(s.message().data(), s.message().size());
  if (message.size() > kMaxMessageBytes) message = message.substr(0, kMaxMessageBytes);
  w.U64(static_cast<uint64_t>(s.code())).U64(failure).Str(message);
}

bool GetStatus(FieldReader& r, absl::Status* out) {
  uint64_t code = 0, failure = 0;
  std::string message;
  if (!r.U64("status code", &code) || !r.U64("failure class", &failure) ||
      !r.Str("status message", kMaxMessageBytes, &message)) {
    return false;
  }
  if (code > static_cast<uint64_t>(absl::StatusCode::kUnauthenticated)) {
    return r.Fail("status code", "out of range");
  }
  for (char& c : message) {
    if (!Printable(c)) c = '?';
  }
  const auto status_code = static_cast<absl::StatusCode>(code);
  if (status_code == absl::StatusCode::kOk) {
    *out = absl::OkStatus();
    return failure == 0 ? true : r.Fail("failure class", "on an OK status");
  }
  switch (failure) {
    case 0: *out = absl::Status(status_code, message); return true;
    case 1: *out = release::ProvenanceFailure(message); break;
    case 2: *out = release::TransferFailure(message); break;
    case 3: *out = release::ChecksumFailure(message); break;
    default: return r.Fail("failure class", "out of range");
  }
  if (out->code() != status_code) return r.Fail("failure class", "with another status code");
  return true;
}

namespace {

// The common shape of every decoder of a result: the status, then the value when OK.
template <typename T, typename ReadValue>
absl::StatusOr<absl::StatusOr<T>> DecodeResult(std::string_view payload, ReadValue read) {
  FieldReader r(payload);
  absl::Status child;
  if (!GetStatus(r, &child)) {
    if (!r.status().ok()) return r.status();
    return Protocol("a malformed status");
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
  if (!wire::IsArtifactName(a.name)) return Protocol("an artifact name breaks its rule");
  if (!wire::IsManifestArtifactKind(a.kind)) return Protocol("an unknown artifact kind");
  if (!wire::IsDigest(a.sha256)) return Protocol("an artifact digest breaks its rule");
  if (a.size < 0) return Protocol("a negative artifact size");
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
  if (!wire::IsReleaseSourceName(a.source)) return Protocol("a release source breaks its rule");
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

absl::StatusOr<absl::Status> DecodeStatusResult(std::string_view payload) {
  FieldReader r(payload);
  absl::Status child;
  if (!GetStatus(r, &child)) {
    if (!r.status().ok()) return r.status();
    return Protocol("a malformed status");
  }
  RETURN_IF_ERROR(r.Finish());
  return child;
}

absl::StatusOr<absl::StatusOr<std::string>> DecodeCurrentResult(std::string_view payload) {
  return DecodeResult<std::string>(payload, [](FieldReader& r) -> absl::StatusOr<std::string> {
    std::string source;
    if (!r.Str("source", wire::kMaxReleaseSourceBytes, &source)) return r.status();
    if (!wire::IsReleaseSourceName(source)) return Protocol("a release source breaks its rule");
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
        if (!wire::IsUuid(e.node_id)) return Protocol("the node id is not a uuid");
        if (e.credential.empty() || !wire::IsWireString(e.credential, wire::kMaxOpaqueBytes)) {
          return Protocol("the credential breaks its rule");
        }
        if (e.deployment_generation <= 0) return Protocol("the generation is not positive");
        if (!wire::IsDigest(e.specification_digest)) {
          return Protocol("the specification digest breaks its rule");
        }
        if (!wire::IsReleaseSourceName(e.runtime_source)) {
          return Protocol("the runtime source breaks its rule");
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
        if (artifacts > wire::kMaxRuntimeArtifacts) return Protocol("too many artifacts");
        for (uint64_t i = 0; i < artifacts; ++i) {
          ASSIGN_OR_RETURN(wire::RuntimeArtifact a, GetArtifact(r));
          d.artifacts.push_back(std::move(a));
        }
        if (!r.U64("image count", &images)) return r.status();
        if (images < wire::kMinSpecImages || images > wire::kMaxSpecImages) {
          return Protocol("an image count out of bounds");
        }
        for (uint64_t i = 0; i < images; ++i) {
          wire::SpecImage img;
          uint64_t identities = 0;
          r.Str("image name", wire::kMaxImageNameBytes, &img.name);
          r.Str("image artifact", wire::kMaxArtifactNameBytes, &img.artifact);
          if (!r.U64("identity count", &identities)) return r.status();
          if (identities < wire::kMinImageIdentities || identities > wire::kMaxImageIdentities) {
            return Protocol("an identity count out of bounds");
          }
          for (uint64_t j = 0; j < identities; ++j) {
            std::string id;
            if (!r.Str("image identity", kMaxIdentityBytes, &id)) return r.status();
            if (!IsIdentity(id)) return Protocol("an image identity breaks its rule");
            img.identities.push_back(std::move(id));
          }
          if (!wire::IsWireString(img.name, wire::kMaxImageNameBytes) || img.name.empty() ||
              !wire::IsArtifactName(img.artifact)) {
            return Protocol("an image breaks its rule");
          }
          d.images.push_back(std::move(img));
        }
        if (!r.status().ok()) return r.status();
        if (d.generation <= 0 || !wire::IsCode(d.provider) ||
            !wire::IsReleaseSourceName(d.runtime_source)) {
          return Protocol("the specification's generation, provider or source breaks its rule");
        }
        return d;
      });
}

}  // namespace sn::install::fetchwire

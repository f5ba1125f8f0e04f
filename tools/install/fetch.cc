#include "tools/install/fetch.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/connection/http_client.h"
#include "common/atomic_file.h"
#include "common/release/artifact.h"
#include "common/release/failure.h"
#include "common/release/layout.h"
#include "common/status_macros.h"
#include "common/wire/limits.h"

namespace sn::install {
namespace {

std::string ReleasePath(const std::string& source, std::string_view name) {
  return absl::StrCat("/releases/", source, "/", std::string(name));
}

}  // namespace

StagedFile::~StagedFile() {
  if (fd_ >= 0) close(fd_);
  if (!committed_) unlink(path_.c_str());
}

absl::Status StagedFile::Open() {
  unlink(path_.c_str());  // a download an earlier run left unfinished
  fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) return ErrnoStatus(errno, "create " + path_);
  return absl::OkStatus();
}

absl::Status StagedFile::Write(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "write " + path_);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status StagedFile::Commit() {
  if (fsync(fd_) != 0) return ErrnoStatus(errno, "fsync " + path_);
  if (close(fd_) != 0) {
    fd_ = -1;
    return ErrnoStatus(errno, "close " + path_);
  }
  fd_ = -1;
  committed_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ConsoleReleases::GetSmall(const std::string& target, size_t max_bytes) {
  agent::HttpCallSpec spec;
  spec.method = "GET";
  spec.target = target;
  spec.max_body_bytes = max_bytes;
  absl::StatusOr<agent::HttpResult> r = agent::HttpCall(origin_, ca_bundle_, spec);
  if (!r.ok()) {
    return release::TransferFailure(absl::StrCat("GET ", target, ": ", r.status().message()));
  }
  if (r->status == 404) return absl::NotFoundError(absl::StrCat("GET ", target, ": HTTP 404"));
  if (r->status != 200) {
    return release::TransferFailure(absl::StrCat("GET ", target, ": HTTP ", r->status));
  }
  return std::move(r->body);
}

absl::StatusOr<std::string> ConsoleReleases::Current() {
  ASSIGN_OR_RETURN(std::string body, GetSmall("/releases/current", wire::kMaxHttpBodyBytes));
  absl::StatusOr<wire::CurrentRelease> current = wire::DecodeCurrentRelease(body);
  if (!current.ok()) {
    return release::ProvenanceFailure(
        absl::StrCat("GET /releases/current: ", current.status().message()));
  }
  return current->source;
}

absl::StatusOr<fetchwire::MetadataFiles> ConsoleReleases::Files(const std::string& source) {
  fetchwire::MetadataFiles f;
  ASSIGN_OR_RETURN(f.manifest, GetSmall(ReleasePath(source, release::kManifestFileName),
                                        release::kMaxManifestBytes));
  ASSIGN_OR_RETURN(f.signature, GetSmall(ReleasePath(source, release::kSignatureFileName),
                                         release::kMaxSignatureFileBytes));
  ASSIGN_OR_RETURN(f.sums,
                   GetSmall(ReleasePath(source, release::kSumsFileName), release::kMaxSumsBytes));
  return f;
}

absl::StatusOr<release::VerifiedRelease> ConsoleReleases::Metadata(const std::string& source) {
  ASSIGN_OR_RETURN(fetchwire::MetadataFiles f, Files(source));
  return release::VerifyRelease(source, std::move(f.manifest), f.signature, f.sums, *key_);
}

absl::Status ConsoleReleases::Artifact(const std::string& source, const wire::RuntimeArtifact& a,
                                       const std::string& path) {
  StagedFile out(path);
  RETURN_IF_ERROR(out.Open());
  RETURN_IF_ERROR(Stream(source, a, [&](std::string_view bytes) { return out.Write(bytes); }));
  return out.Commit();
}

absl::Status ConsoleReleases::Stream(
    const std::string& source, const wire::RuntimeArtifact& a,
    const std::function<absl::Status(std::string_view)>& on_bytes) {
  release::ArtifactVerifier verifier(a);
  agent::HttpCallSpec spec;
  spec.method = "GET";
  spec.target = ReleasePath(source, a.name);
  agent::HttpStreamSink sink;
  sink.on_head = [&](int status, std::optional<uint64_t>) -> absl::Status {
    if (status == 404) {
      return absl::NotFoundError(absl::StrCat("GET ", spec.target, ": HTTP 404"));
    }
    if (status != 200) {
      return release::TransferFailure(absl::StrCat("GET ", spec.target, ": HTTP ", status));
    }
    return absl::OkStatus();
  };
  sink.on_data = [&](std::string_view bytes) -> absl::Status {
    RETURN_IF_ERROR(verifier.Update(bytes));
    return on_bytes(bytes);
  };
  absl::Status s = agent::HttpGetStream(origin_, ca_bundle_, spec, sink);
  if (!s.ok()) {
    if (release::FailureClassOf(s).has_value() || absl::IsNotFound(s)) return s;
    return release::TransferFailure(absl::StrCat("GET ", spec.target, ": ", s.message()));
  }
  return verifier.Finish();
}

std::vector<std::string> BundleReleases::Sources() const {
  std::vector<std::string> names;
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (!wire::IsReleaseSourceName(name)) continue;
    if (access(absl::StrCat(dir_, "/", name, "/", std::string(release::kManifestFileName)).c_str(),
               F_OK) == 0) {
      names.push_back(name);
    }
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<release::VerifiedRelease> BundleReleases::Metadata(const std::string& source) {
  const std::string base = absl::StrCat(dir_, "/", source, "/");
  absl::StatusOr<std::string> manifest =
      ReadSmallFile(base + std::string(release::kManifestFileName), release::kMaxManifestBytes);
  if (absl::IsNotFound(manifest.status())) {
    return absl::NotFoundError(absl::StrCat("the bundle ", dir_, " holds no release ", source));
  }
  if (!manifest.ok()) return release::ProvenanceFailure(std::string(manifest.status().message()));
  absl::StatusOr<std::string> sig = ReadSmallFile(base + std::string(release::kSignatureFileName),
                                                  release::kMaxSignatureFileBytes);
  if (!sig.ok()) return release::ProvenanceFailure(std::string(sig.status().message()));
  absl::StatusOr<std::string> sums =
      ReadSmallFile(base + std::string(release::kSumsFileName), release::kMaxSumsBytes);
  if (!sums.ok()) return release::ProvenanceFailure(std::string(sums.status().message()));
  return release::VerifyRelease(source, *std::move(manifest), *sig, *sums, *key_);
}

absl::Status BundleReleases::Artifact(const std::string& source, const wire::RuntimeArtifact& a,
                                      const std::string& path) {
  const std::string from = absl::StrCat(dir_, "/", source, "/", a.name);
  int in = open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("the bundle lacks ", from));
    }
    return ErrnoStatus(errno, "open " + from);
  }
  StagedFile out(path);
  absl::Status s = out.Open();
  release::ArtifactVerifier verifier(a);
  std::string buf(64 * 1024, '\0');
  while (s.ok()) {
    ssize_t n = read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      s = ErrnoStatus(errno, "read " + from);
      break;
    }
    if (n == 0) break;
    std::string_view piece(buf.data(), static_cast<size_t>(n));
    s = verifier.Update(piece);
    if (s.ok()) s = out.Write(piece);
  }
  close(in);
  if (s.ok()) s = verifier.Finish();
  if (s.ok()) s = out.Commit();
  return s;
}

absl::StatusOr<std::string> FetchConfiguration(const agent::Origin& origin,
                                               const std::optional<std::string>& ca_bundle,
                                               const std::string& credential, int64_t generation) {
  agent::HttpCallSpec spec;
  spec.method = "GET";
  spec.target = absl::StrCat("/api/v1/sandbox-node/configuration?generation=", generation);
  spec.bearer = credential;
  spec.max_body_bytes = wire::kMaxHttpBodyBytes;
  ASSIGN_OR_RETURN(agent::HttpResult r, agent::HttpCall(origin, ca_bundle, spec));
  if (r.status == 401) {
    return absl::UnauthenticatedError(
        "Core rejected the node credential (HTTP 401) on the configuration route");
  }
  if (r.status == 404) {
    return absl::NotFoundError(
        absl::StrCat("Core has no configuration of generation ", generation, " for this node"));
  }
  if (r.status != 200) {
    return absl::UnavailableError(absl::StrCat("the configuration route answered HTTP ", r.status));
  }
  return std::move(r.body);
}

}  // namespace sn::install

#include "privhelper/docker/importer.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "privhelper/docker/archive_identity.h"
#include "privhelper/docker/inventory.h"
#include "privhelper/docker/probe.h"
#include "privhelper/store/prep_failure.h"

namespace sn::docker {
namespace {

using json = nlohmann::json;
using privhelper::store::PrepFailure;

absl::Status TransportFailed(std::string_view step, const absl::Status& s) {
  LogWarning("docker image store request failed", {{"step", step}, {"error", s.ToString()}});
  return PrepFailure(absl::StatusCode::kUnavailable, ClassifyTransportError(s),
                     absl::StrCat("docker ", absl::string_view(step.data(), step.size()),
                                  " failed"));
}

bool IsSha256Identity(std::string_view s) {
  return s.size() == 71 && s.substr(0, 7) == "sha256:";
}

}  // namespace

absl::Status DockerImporter::Load(const Source& source, uint64_t size) {
  docker::RequestOptions o;
  o.timeout = load_timeout_;
  o.content_type = "application/x-tar";
  o.body_source = source;
  o.body_source_size = size;
  o.max_response_bytes = size_t{1} << 20;
  absl::StatusOr<docker::HttpResponse> r = engine_->Request(
      "POST", absl::StrCat(docker::kApiVersionPrefix, "/images/load?quiet=1"), "", o);
  if (!r.ok()) return TransportFailed("images/load", r.status());
  if (r->status != 200) {
    LogWarning("docker refused an image archive", {{"http_status", r->status}});
    return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kConfigurationInvalid,
                       absl::StrCat("images/load answered HTTP ", r->status));
  }
  // A stream of JSON messages; a load that failed says so in one with "error".
  for (absl::string_view line : absl::StrSplit(r->body, '\n', absl::SkipWhitespace())) {
    json m = json::parse(line.begin(), line.end(), nullptr, false);
    if (m.is_object() && (m.contains("error") || m.contains("errorDetail"))) {
      LogWarning("docker could not load an image archive");
      return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kConfigurationInvalid,
                         "the image archive did not load");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DockerImporter::ArchiveIdentity(const Source& source,
                                                            const Skip& skip, uint64_t size) {
  uint64_t left = size;
  docker::ArchiveSource in;
  in.read = [&](char* buf, size_t n) -> absl::StatusOr<size_t> {
    if (left == 0) return size_t{0};
    ASSIGN_OR_RETURN(size_t got, source(buf, static_cast<size_t>(std::min<uint64_t>(n, left))));
    left -= got;
    return got;
  };
  if (skip) {
    in.skip = [&](uint64_t n) -> absl::Status {
      if (n > left) return absl::InvalidArgumentError("image archive: truncated");
      RETURN_IF_ERROR(skip(n));
      left -= n;
      return absl::OkStatus();
    };
  }
  return docker::ArchiveConfigIdentity(in);
}

absl::StatusOr<std::string> DockerImporter::Resolve(const std::string& identity) {
  if (!IsSha256Identity(identity)) return absl::NotFoundError("not a config identity");
  docker::RequestOptions o;
  o.timeout = absl::Seconds(30);
  o.max_response_bytes = size_t{32} << 20;
  absl::StatusOr<docker::HttpResponse> r = engine_->Request(
      "GET", absl::StrCat(docker::kApiVersionPrefix, "/images/", identity, "/json"), "", o);
  if (!r.ok()) return TransportFailed("images/inspect", r.status());
  if (r->status == 404) return absl::NotFoundError("the daemon does not hold the image");
  if (r->status != 200) return TransportFailed("images/inspect", absl::UnavailableError("http"));
  json doc = json::parse(r->body, nullptr, false);
  // A name lookup could answer another image (a tag spelled like an ID): only the ID itself.
  if (doc.is_object() && doc.contains("Id") && doc["Id"] == identity) return identity;
  return absl::NotFoundError("the daemon does not hold the image");
}

absl::Status DockerImporter::ForgetImages(const std::vector<std::string>& native_images) {
  for (const std::string& image : native_images) {
    LogInfo("collection keeps a Docker image: the daemon's images are never removed",
            {{"image", image}});
  }
  return absl::OkStatus();
}

}  // namespace sn::docker

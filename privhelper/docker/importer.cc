#include "privhelper/docker/importer.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "privhelper/docker/inventory.h"
#include "privhelper/docker/probe.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper {
namespace {

using json = nlohmann::json;
using store::PrepFailure;

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

absl::StatusOr<std::string> DockerImporter::Resolve(const std::vector<std::string>& identities) {
  docker::RequestOptions o;
  o.timeout = absl::Seconds(30);
  o.max_response_bytes = size_t{32} << 20;
  for (const std::string& id : identities) {
    if (!IsSha256Identity(id)) continue;
    absl::StatusOr<docker::HttpResponse> r = engine_->Request(
        "GET", absl::StrCat(docker::kApiVersionPrefix, "/images/", id, "/json"), "", o);
    if (!r.ok()) return TransportFailed("images/inspect", r.status());
    if (r->status == 404) continue;
    if (r->status != 200) return TransportFailed("images/inspect", absl::UnavailableError("http"));
    json doc = json::parse(r->body, nullptr, false);
    if (doc.is_object() && doc.contains("Id") && doc["Id"] == id) return id;
  }
  // Manifest identities: the repository digests of the images the daemon holds.
  absl::StatusOr<docker::HttpResponse> r = engine_->Request(
      "GET", absl::StrCat(docker::kApiVersionPrefix, "/images/json?digests=1"), "", o);
  if (!r.ok()) return TransportFailed("images/list", r.status());
  if (r->status != 200) return TransportFailed("images/list", absl::UnavailableError("http"));
  json list = json::parse(r->body, nullptr, false);
  if (!list.is_array()) return TransportFailed("images/list", absl::UnavailableError("malformed"));
  for (const std::string& id : identities) {
    if (!IsSha256Identity(id)) continue;
    for (const json& image : list) {
      if (!image.is_object() || !image.contains("Id") || !image["Id"].is_string() ||
          !image.contains("RepoDigests") || !image["RepoDigests"].is_array()) {
        continue;
      }
      for (const json& d : image["RepoDigests"]) {
        if (d.is_string() && absl::EndsWith(d.get<std::string>(), absl::StrCat("@", id))) {
          return image["Id"].get<std::string>();
        }
      }
    }
  }
  return absl::NotFoundError("the daemon holds none of the image's identities");
}

absl::Status DockerImporter::ForgetImages(const std::vector<std::string>& native_images) {
  for (const std::string& image : native_images) {
    LogInfo("collection keeps a Docker image: the daemon's images are never removed",
            {{"image", image}});
  }
  return absl::OkStatus();
}

}  // namespace sn::privhelper

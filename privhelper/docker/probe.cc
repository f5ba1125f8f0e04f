#include "privhelper/docker/probe.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/error_cause.h"
#include "common/log.h"

namespace sn::docker {
namespace {

using privhelper::ProbeResult;

using json = nlohmann::json;
using docker::TransportFailure;

ProbeResult NotReady(Diagnostic d, std::string_view step, std::string_view detail) {
  LogWarning("docker probe not ready", {{"step", step},
                                        {"diagnostic", DiagnosticCode(d)},
                                        {"detail", detail}});
  ProbeResult r;
  r.diagnostic = d;
  return r;
}

// Maps a non-2xx answer: an authorization refusal by the daemon (or an authz plugin) is
// daemon_permission_denied; everything else is provider_unavailable.
Diagnostic ClassifyHttpStatus(int status) {
  if (status == 401 || status == 403) return Diagnostic::kDaemonPermissionDenied;
  return Diagnostic::kProviderUnavailable;
}

// A fingerprint field: printable ASCII without spaces, bounded; anything else is refused so
// that daemon text cannot smuggle content into the fingerprint.
bool CleanField(const json& obj, const char* member, std::string* out) {
  auto it = obj.find(member);
  if (it == obj.end() || !it->is_string()) return false;
  const std::string& s = it->get_ref<const std::string&>();
  if (s.empty() || s.size() > 64) return false;
  for (unsigned char c : s) {
    if (c <= ' ' || c >= 0x7f) return false;
  }
  *out = s;
  return true;
}

}  // namespace

Diagnostic ClassifyTransportError(const absl::Status& s) {
  // The code TransportError gave it (engine.cc); an Engine error of another origin is
  // provider_unavailable: the daemon did not answer what was asked.
  if (!docker::GetTransportFailure(s).has_value()) return Diagnostic::kProviderUnavailable;
  return CauseOf(s)->code;
}

privhelper::ProbeResult ProbeDocker(docker::DockerEngine& engine, absl::Duration timeout) {
  docker::RequestOptions opts;
  opts.timeout = timeout;
  opts.max_response_bytes = 1 << 20;

  absl::StatusOr<docker::HttpResponse> ping = engine.Request("GET", "/_ping", "", opts);
  if (!ping.ok()) return NotReady(ClassifyTransportError(ping.status()), "ping", ping.status().ToString());
  if (ping->status != 200) {
    return NotReady(ClassifyHttpStatus(ping->status), "ping",
                    absl::StrCat("http status ", ping->status));
  }

  json version_doc;
  {
    absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/version", "", opts);
    if (!r.ok()) return NotReady(ClassifyTransportError(r.status()), "version", r.status().ToString());
    if (r->status != 200) {
      return NotReady(ClassifyHttpStatus(r->status), "version", absl::StrCat("http status ", r->status));
    }
    version_doc = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  }
  std::string version;
  if (version_doc.is_discarded() || !version_doc.is_object() ||
      !CleanField(version_doc, "Version", &version)) {
    return NotReady(Diagnostic::kProviderUnavailable, "version", "malformed /version answer");
  }

  json info_doc;
  {
    absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/info", "", opts);
    if (!r.ok()) return NotReady(ClassifyTransportError(r.status()), "info", r.status().ToString());
    if (r->status != 200) {
      return NotReady(ClassifyHttpStatus(r->status), "info", absl::StrCat("http status ", r->status));
    }
    info_doc = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  }
  std::string driver, cgroup_driver;
  if (info_doc.is_discarded() || !info_doc.is_object() ||
      !CleanField(info_doc, "Driver", &driver) ||
      !CleanField(info_doc, "CgroupDriver", &cgroup_driver)) {
    return NotReady(Diagnostic::kProviderUnavailable, "info", "malformed /info answer");
  }

  ProbeResult ready;
  ready.ready = true;
  ready.fingerprint = absl::StrCat("docker/", version, " ", driver, " ", cgroup_driver);
  return ready;
}

}  // namespace sn::docker

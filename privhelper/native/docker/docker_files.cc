// write_file / read_file through the Engine archive API. The daemon resolves paths inside the
// container's root (symlinks are scoped to it); paths are re-checked here as well.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/wire/argument_rules.h"
#include "privhelper/native/docker/docker_ops.h"
#include "privhelper/docker/inventory.h"
#include "privhelper/native/docker/docker_ops_internal.h"
#include "privhelper/native/docker/tar.h"

namespace sn::native::docker {
namespace {

using internal::ErrorResponse;
using internal::LogOpFailure;
using internal::Options;

constexpr int kMaxSymlinkHops = 8;

// Absolute, <= 4096 bytes, no empty, "." or ".." component, not "/" (docs/protocol.md #2).
bool ValidPath(const std::string& p) {
  if (p.size() < 2 || p.size() > 4096 || p[0] != '/') return false;
  std::vector<std::string> parts = absl::StrSplit(p.substr(1), '/');
  for (const std::string& c : parts) {
    if (c.empty() || c == "." || c == "..") return false;
    if (c.find('\0') != std::string::npos) return false;
  }
  return true;
}

std::string Dirname(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == 0 ? "/" : p.substr(0, slash);
}

std::string Basename(const std::string& p) { return p.substr(p.rfind('/') + 1); }

// Resolves a symlink target found at `path` (lexically; the daemon scopes it to the root).
std::string ResolveLink(const std::string& path, const std::string& target) {
  std::string joined = target.empty() || target[0] != '/' ? Dirname(path) + "/" + target : target;
  std::vector<std::string> out;
  for (absl::string_view c : absl::StrSplit(joined, '/')) {
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      if (!out.empty()) out.pop_back();  // ".." at the root stays at the root
      continue;
    }
    out.emplace_back(c);
  }
  std::string r;
  for (const std::string& c : out) r += "/" + c;
  return r.empty() ? "/" : r;
}

}  // namespace

pb::ExecuteResponse DockerOperations::WriteFile(const pb::WriteFileArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  if (!ValidPath(a.path()) || !wire::rules::FileMode(a.mode()) ||
      !wire::rules::FileContentBytes(a.content().size())) {
    return ErrorResponse(pb::ERROR_CODE_INVALID, *ctl);
  }
  absl::StatusOr<internal::Lookup> found =
      internal::FindSandbox(*engine_, installation_, a.sandbox_id(), *ctl);
  if (!found.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  if (!found->exists) return ErrorResponse(pb::ERROR_CODE_NOT_FOUND, *ctl);
  if (found->generation != generation_ || !found->running) {
    return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  }
  // The archive goes out as header, the request's own content bytes, trailer: never copied.
  TarFraming tar = TarOneFileFraming(Basename(a.path()), static_cast<uint32_t>(a.mode()),
                                     a.content().size());
  ::sn::docker::RequestOptions opts = Options(*ctl);
  opts.content_type = "application/x-tar";
  opts.body_parts = {tar.head, a.content(), tar.tail};
  ctl->native_started = true;
  absl::StatusOr<::sn::docker::HttpResponse> r = engine_->Request(
      "PUT",
      absl::StrCat(kApi, "/containers/", found->id, "/archive?path=",
                   ::sn::docker::UrlEncode(Dirname(a.path())), "&noOverwriteDirNonDir=true"),
      "", opts);
  if (!r.ok()) {
    LogOpFailure("write_file", "put archive", r.status().ToString());
    return ErrorResponse(internal::MutationTransportCode(r.status()), *ctl);
  }
  if (r->status != 200) {
    LogOpFailure("write_file", "put archive", absl::StrCat("http ", r->status));
    // 400/403/404: the daemon refused (bad or read-only or missing directory).
    return ErrorResponse(r->status >= 500 ? pb::ERROR_CODE_UNCERTAIN : pb::ERROR_CODE_FAILED, *ctl);
  }
  pb::ExecuteResponse resp;
  resp.set_native_call_started(true);
  resp.mutable_write_file()->set_size(static_cast<int64_t>(a.content().size()));
  return resp;
}

pb::ExecuteResponse DockerOperations::ReadFile(const pb::ReadFileArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  // The helper keeps at most max_bytes: a bound beyond the spec's is refused before any I/O.
  if (!ValidPath(a.path()) || !wire::rules::ReadMaxBytes(a.max_bytes())) {
    return ErrorResponse(pb::ERROR_CODE_INVALID, *ctl);
  }
  absl::StatusOr<internal::Lookup> found =
      internal::FindSandbox(*engine_, installation_, a.sandbox_id(), *ctl);
  if (!found.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  if (!found->exists) return ErrorResponse(pb::ERROR_CODE_NOT_FOUND, *ctl);
  if (found->generation != generation_ || !found->running) {
    return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  }
  std::string path = a.path();
  for (int hop = 0; hop <= kMaxSymlinkHops; ++hop) {
    TarFirstEntryReader reader(static_cast<uint64_t>(a.max_bytes()));
    ::sn::docker::RequestOptions opts = Options(*ctl, 1 << 20);
    opts.body_sink = [&reader](std::string_view d) { return reader.Feed(d); };
    absl::StatusOr<::sn::docker::HttpResponse> r = engine_->Request(
        "GET",
        absl::StrCat(kApi, "/containers/", found->id,
                     "/archive?path=", ::sn::docker::UrlEncode(path)),
        "", opts);
    if (!r.ok()) {
      LogOpFailure("read_file", "get archive", r.status().ToString());
      return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
    }
    if (r->status == 404) return ErrorResponse(pb::ERROR_CODE_FAILED, *ctl);  // no such path
    if (r->status != 200) {
      LogOpFailure("read_file", "get archive", absl::StrCat("http ", r->status));
      return ErrorResponse(r->status >= 500 ? pb::ERROR_CODE_UNAVAILABLE : pb::ERROR_CODE_FAILED, *ctl);
    }
    if (!reader.error().ok() || !reader.header_seen()) {
      LogOpFailure("read_file", "tar", reader.error().ToString());
      return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
    }
    if (reader.type() == '2') {
      path = ResolveLink(path, reader.link_target());
      if (!ValidPath(path)) return ErrorResponse(pb::ERROR_CODE_FAILED, *ctl);
      continue;
    }
    if (reader.type() != '0') return ErrorResponse(pb::ERROR_CODE_FAILED, *ctl);  // not a file
    if (!reader.complete()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);  // cut short
    pb::ExecuteResponse resp;
    pb::ReadFileResult* out = resp.mutable_read_file();
    out->set_size(static_cast<int64_t>(reader.size()));
    out->set_content(reader.TakeContent());
    out->set_truncated(reader.size() > static_cast<uint64_t>(a.max_bytes()));
    return resp;
  }
  return ErrorResponse(pb::ERROR_CODE_FAILED, *ctl);  // symlink loop
}

}  // namespace sn::native::docker

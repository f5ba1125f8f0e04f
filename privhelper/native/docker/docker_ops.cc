#include "privhelper/native/docker/docker_ops.h"

#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/json/reader.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "privhelper/docker/inventory.h"
#include "privhelper/native/docker/docker_ops_internal.h"
#include "privhelper/native/sandbox_profile.h"

namespace sn::native::docker {
namespace internal {

using json = nlohmann::json;

::sn::docker::RequestOptions Options(const CallControl& ctl, size_t max_bytes) {
  ::sn::docker::RequestOptions o;
  absl::Duration left = ctl.deadline - absl::Now();
  o.timeout = std::max(absl::Milliseconds(1), std::min(left, absl::Minutes(60)));
  o.max_response_bytes = max_bytes;
  return o;
}

std::string ContainerName(const std::string& installation, const std::string& sandbox_id) {
  return absl::StrCat("sn-", installation, "-", sandbox_id);
}

namespace {

// "running" -> running; "created"/"exited" -> retained; anything else is doubt.
absl::StatusOr<bool> RunningFromStatus(std::string_view s) {
  if (s == "running") return true;
  if (s == "created" || s == "exited") return false;
  return absl::UnavailableError(absl::StrCat("container in state ", std::string(s)));
}

// The installation's containers (only `sandbox_id`'s when it is not empty) from one complete,
// label-filtered list, every entry re-checked: the inventory's one reader
// (privhelper/docker/inventory.h), which the provider's probe uses too.
absl::StatusOr<std::vector<::sn::docker::SandboxContainer>> List(::sn::docker::DockerEngine& e,
                                                           const std::string& installation,
                                                           std::string_view sandbox_id,
                                                           const CallControl& ctl) {
  return ::sn::docker::ListSandboxes(e, installation, sandbox_id, Options(ctl, 32 << 20));
}

Lookup FromListed(const ::sn::docker::SandboxContainer& c) {
  Lookup out;
  out.exists = true;
  out.id = c.id;
  out.running = c.running;
  out.generation = c.generation;
  out.args_digest = c.args_digest;
  return out;
}

// The asked-about sandbox's own listed container: one in a transitional state (paused,
// restarting, removing, dead) is doubt, never a state to act on (inventory.h).
absl::StatusOr<Lookup> OwnListed(const ::sn::docker::SandboxContainer& c) {
  if (!c.transitional.empty()) {
    return absl::UnavailableError(absl::StrCat("container in state ", c.transitional));
  }
  return FromListed(c);
}

// Counts one listed container in its state.
void Add(const ::sn::docker::SandboxContainer& c, Counts* n) {
  StateCount* in = c.running ? &n->running : &n->retained;
  ++in->containers;
  if (!c.sandbox_id.empty()) in->sandboxes.insert(c.sandbox_id);
}

}  // namespace

namespace {

// The sandbox's containers as the complete, label-filtered list shows them: the only proof of
// absence (spec §5).
absl::StatusOr<Lookup> FindByList(::sn::docker::DockerEngine& e, const std::string& installation,
                                  const std::string& sandbox_id, const CallControl& ctl) {
  absl::StatusOr<std::vector<::sn::docker::SandboxContainer>> list =
      List(e, installation, sandbox_id, ctl);
  if (!list.ok()) return list.status();
  if (list->empty()) return Lookup{};
  if (list->size() > 1) return absl::UnavailableError("several containers for one sandbox");
  return OwnListed((*list)[0]);
}

// The members of GET /containers/{name}/json that FromInspect reads. The answer (about 4 KiB:
// host configuration, mounts, networks...) is read with the pull reader and everything else is
// skipped without being built: it is parsed after the daemon answers, on every inspect's path
// (docs/performance.md, "Node overhead on inspect").
struct InspectFields {
  std::optional<std::string> id, name, status;
  bool config = false, state = false;
  std::map<std::string, std::string, std::less<>> labels;  // ours only (sn.*)
};

bool OurLabel(std::string_view key) {
  return key == kLabelInstallation || key == kLabelSandbox || key == kLabelGeneration ||
         key == kLabelArgs;
}

// A member read twice would make the answer ambiguous: malformed.
absl::Status ReadOnce(::sn::json::Reader& r, std::optional<std::string>* out) {
  if (out->has_value()) return absl::InvalidArgumentError("duplicate member");
  ASSIGN_OR_RETURN(std::string_view v, r.String());
  out->emplace(v);
  return absl::OkStatus();
}

// Calls fn(name) for each member of the object at `r`; fn reads or skips the member's value
// (the name's view ends with that read). Unlike the wire decoders' ForEachMember
// (common/wire/decode_util.h), names are not resolved against a table: the daemon's answers
// carry many members we do not read, and more in every API version.
template <typename Fn>
absl::Status ForEachMember(::sn::json::Reader& r, Fn&& fn) {
  RETURN_IF_ERROR(r.BeginObject());
  for (;;) {
    std::string_view name;
    ASSIGN_OR_RETURN(bool more, r.NextMember(&name));
    if (!more) return absl::OkStatus();
    RETURN_IF_ERROR(fn(name));
  }
}

// Config.Labels (an object of strings): only ours.
absl::Status ReadLabels(::sn::json::Reader& r, InspectFields* f) {
  return ForEachMember(r, [&](std::string_view key) -> absl::Status {
    ASSIGN_OR_RETURN(::sn::json::ValueType t, r.Peek());
    if (!OurLabel(key) || t != ::sn::json::ValueType::kString) return r.Skip();
    std::string k(key);  // the name's view ends at the next read
    ASSIGN_OR_RETURN(std::string_view v, r.String());
    if (!f->labels.emplace(std::move(k), std::string(v)).second) {
      return absl::InvalidArgumentError("duplicate label");
    }
    return absl::OkStatus();
  });
}

// Config: only Labels (an object, or null: no labels).
absl::Status ReadConfig(::sn::json::Reader& r, InspectFields* f) {
  bool labels_seen = false;
  return ForEachMember(r, [&](std::string_view member) -> absl::Status {
    if (member != "Labels") return r.Skip();
    if (labels_seen) return absl::InvalidArgumentError("duplicate member");
    labels_seen = true;
    ASSIGN_OR_RETURN(::sn::json::ValueType t, r.Peek());
    return t == ::sn::json::ValueType::kObject ? ReadLabels(r, f) : r.Skip();
  });
}

// State: only Status.
absl::Status ReadState(::sn::json::Reader& r, InspectFields* f) {
  return ForEachMember(r, [&](std::string_view member) -> absl::Status {
    if (member != "Status") return r.Skip();
    ASSIGN_OR_RETURN(::sn::json::ValueType t, r.Peek());
    if (t != ::sn::json::ValueType::kString) return absl::InvalidArgumentError("State.Status");
    return ReadOnce(r, &f->status);
  });
}

// The whole answer is read (and checked to be one JSON object, nothing after it), but only the
// members above are kept.
absl::StatusOr<InspectFields> ReadInspect(std::string_view body) {
  ::sn::json::Reader r(body, 0, /*max_depth=*/64);
  InspectFields f;
  RETURN_IF_ERROR(ForEachMember(r, [&](std::string_view member) -> absl::Status {
    ASSIGN_OR_RETURN(::sn::json::ValueType t, r.Peek());
    if ((member == "Id" || member == "Name") && t == ::sn::json::ValueType::kString) {
      return ReadOnce(r, member == "Id" ? &f.id : &f.name);
    }
    bool* seen = member == "Config" ? &f.config : member == "State" ? &f.state : nullptr;
    if (seen == nullptr || t != ::sn::json::ValueType::kObject) return r.Skip();
    if (*seen) return absl::InvalidArgumentError("duplicate member");
    *seen = true;
    return member == "Config" ? ReadConfig(r, &f) : ReadState(r, &f);
  }));
  RETURN_IF_ERROR(r.Finish());
  return f;
}

// The container that GET /containers/{name}/json returned for `name`: ours only when its
// name and labels say so; anything else under our name is doubt, never a match or absence.
absl::StatusOr<Lookup> FromInspect(const std::string& body, const std::string& name,
                                   const std::string& installation,
                                   const std::string& sandbox_id) {
  absl::StatusOr<InspectFields> f = ReadInspect(body);
  if (!f.ok()) return absl::UnavailableError("inspect: malformed");
  if (!f->id.has_value() || f->id->empty() || !f->name.has_value() || !f->config ||
      !f->state) {
    return absl::UnavailableError("inspect: incomplete object");
  }
  // The daemon resolves a name or an id prefix; only the exact name is the one we asked for.
  if (*f->name != "/" + name) return absl::UnavailableError("inspect: answered for another name");
  auto label = [&f](const char* key) {
    auto it = f->labels.find(key);
    return it == f->labels.end() ? std::string() : it->second;
  };
  if (label(kLabelInstallation) != installation || label(kLabelSandbox) != sandbox_id) {
    return absl::UnavailableError("container under our name with foreign labels");
  }
  if (!f->status.has_value()) return absl::UnavailableError("inspect: no State.Status");
  absl::StatusOr<bool> running = RunningFromStatus(*f->status);
  if (!running.ok()) return running.status();
  const std::string g = label(kLabelGeneration);
  Lookup out;
  out.exists = true;
  out.id = *std::move(f->id);
  out.running = *running;
  out.generation = ::sn::docker::ParseGenerationLabel(g);
  out.args_digest = label(kLabelArgs);
  return out;
}

}  // namespace

namespace {

// Presence by name: one inspect whose cost does not grow with the daemon's other containers
// (docs/architecture.md, "Finding a sandbox"; docs/protocol.md 12k). nullopt when nothing has
// the name, which is not a complete inventory (the container may have been renamed, or created
// since): absence, or the container under another name, comes only from a list.
absl::StatusOr<std::optional<Lookup>> FindByName(::sn::docker::DockerEngine& e,
                                                 const std::string& installation,
                                                 const std::string& sandbox_id,
                                                 const CallControl& ctl) {
  const std::string name = ContainerName(installation, sandbox_id);
  absl::StatusOr<::sn::docker::HttpResponse> r = e.Request(
      "GET", absl::StrCat(kApi, "/containers/", ::sn::docker::UrlEncode(name), "/json"), "",
      Options(ctl, 4 << 20));
  if (!r.ok()) return r.status();
  if (r->status == 200) {
    absl::StatusOr<Lookup> found = FromInspect(r->body, name, installation, sandbox_id);
    if (!found.ok()) return found.status();
    return std::optional<Lookup>(*std::move(found));
  }
  if (r->status != 404) {
    return absl::UnavailableError(absl::StrCat("inspect by name: http ", r->status));
  }
  return std::optional<Lookup>();
}

}  // namespace

absl::StatusOr<Lookup> FindSandbox(::sn::docker::DockerEngine& e, const std::string& installation,
                                   const std::string& sandbox_id, const CallControl& ctl) {
  absl::StatusOr<std::optional<Lookup>> by_name = FindByName(e, installation, sandbox_id, ctl);
  if (!by_name.ok()) return by_name.status();
  if (by_name->has_value()) return **by_name;
  return FindByList(e, installation, sandbox_id, ctl);
}

absl::StatusOr<Inventory> FindSandboxAndCount(::sn::docker::DockerEngine& e,
                                              const std::string& installation,
                                              const std::string& sandbox_id,
                                              const CallControl& ctl) {
  Inventory out;
  absl::StatusOr<std::optional<Lookup>> by_name = FindByName(e, installation, sandbox_id, ctl);
  if (!by_name.ok()) return by_name.status();
  if (by_name->has_value()) {  // found under its name: the caller needs no count
    out.sandbox = **by_name;
    return out;
  }
  // One complete list of the installation's containers: the entries labelled with this sandbox
  // are the proof of its absence (or its container under another name), all of them the count.
  absl::StatusOr<std::vector<::sn::docker::SandboxContainer>> list = List(e, installation, "", ctl);
  if (!list.ok()) return list.status();
  const ::sn::docker::SandboxContainer* mine = nullptr;
  for (const ::sn::docker::SandboxContainer& c : *list) {
    if (c.sandbox_id == sandbox_id) {
      if (mine != nullptr) return absl::UnavailableError("several containers for one sandbox");
      mine = &c;
    }
    Add(c, &out.counts);
  }
  // Another sandbox's container in a transitional state counts as running (Add).
  if (mine != nullptr) {
    absl::StatusOr<Lookup> own = OwnListed(*mine);
    if (!own.ok()) return own.status();
    out.sandbox = *std::move(own);
  }
  return out;
}

absl::StatusOr<Counts> CountSandboxes(::sn::docker::DockerEngine& e,
                                      const std::string& installation,
                                      const CallControl& ctl) {
  absl::StatusOr<std::vector<::sn::docker::SandboxContainer>> list = List(e, installation, "", ctl);
  if (!list.ok()) return list.status();
  Counts n;
  for (const ::sn::docker::SandboxContainer& c : *list) Add(c, &n);
  return n;
}

int64_t CountWithInFlight(const StateCount& counted, const std::vector<std::string>& in_flight,
                          const std::string& own) {
  return ::sn::native::CountWithInFlight(counted.containers, counted.sandboxes, in_flight, own);
}

pb::ErrorCode MutationTransportCode(const absl::Status& s) {
  std::optional<::sn::docker::TransportFailure> f = ::sn::docker::GetTransportFailure(s);
  if (f == ::sn::docker::TransportFailure::kSocketMissing ||
      f == ::sn::docker::TransportFailure::kConnectionRefused ||
      f == ::sn::docker::TransportFailure::kPermissionDenied) {
    return pb::ERROR_CODE_UNAVAILABLE;
  }
  return pb::ERROR_CODE_UNCERTAIN;
}

void LogOpFailure(std::string_view op, std::string_view what, std::string_view detail) {
  LogWarning("docker operation failed", {{"operation", op}, {"step", what}, {"detail", detail}});
}

std::optional<std::string> CreatedId(const std::string& body) {
  nlohmann::json created = nlohmann::json::parse(body, nullptr, false);
  if (created.is_discarded() || !created.is_object() || !created.contains("Id") ||
      !created["Id"].is_string()) {
    return std::nullopt;
  }
  return created["Id"].get<std::string>();
}

}  // namespace internal

using internal::CountSandboxes;
using internal::ErrorResponse;
using internal::FindSandbox;
using internal::LogOpFailure;
using internal::Lookup;
using internal::MutationTransportCode;
using internal::Options;
using json = nlohmann::json;
using ::sn::native::CreateArgsDigest;
using ::sn::native::NoResultOk;
using ::sn::native::SandboxOk;

namespace {

// The Engine API's create body: the generation's image, the arguments, the labels that make
// the container this installation's sandbox, and the sandbox profile.
json CreateBody(const pb::CreateArgs& a, const std::string& native_image,
                const std::string& installation, int64_t generation, const std::string& digest) {
  json env = json::array();
  for (const auto& [k, v] : std::map<std::string, std::string>(a.env().begin(), a.env().end())) {
    env.push_back(k + "=" + v);
  }
  json body = {
      {"Image", native_image},
      {"Env", env},
      {"Labels",
       {{kLabelInstallation, installation},
        {kLabelGeneration, std::to_string(generation)},
        {kLabelSandbox, a.sandbox_id()},
        {kLabelArgs, digest}}},
      {"HostConfig", profile::SandboxHostConfig(a.cpu_millis(), a.memory_bytes())},
  };
  if (a.command_size() > 0) {
    body["Cmd"] = std::vector<std::string>(a.command().begin(), a.command().end());
  }
  return body;
}

// Starts a container: OK, or the failing status with `*http` set for a daemon refusal.
absl::Status StartContainer(::sn::docker::DockerEngine& e, const std::string& id, CallControl* ctl,
                            int* http) {
  ctl->native_started = true;
  absl::StatusOr<::sn::docker::HttpResponse> r =
      e.Request("POST", absl::StrCat(kApi, "/containers/", id, "/start"), "", Options(*ctl));
  if (!r.ok()) return r.status();
  if (r->status == 204 || r->status == 304) return absl::OkStatus();
  *http = r->status;
  // The daemon's message may quote the sandbox's command: never logged (spec §5).
  return absl::FailedPreconditionError(absl::StrCat("start: http ", r->status));
}

}  // namespace

absl::Status DockerOperations::PrepareForSandbox() {
  // OpenSSL 3 reads its configuration file and fetches the digest on first use; do it now.
  (void)Sha256Hex("");
  return absl::OkStatus();
}

std::string DockerOperations::ContainerName(const std::string& sandbox_id) const {
  return internal::ContainerName(installation_, sandbox_id);
}

pb::ExecuteResponse DockerOperations::Create(const pb::CreateArgs& a, const Call& call) {
  const pb::ExecuteRequest& req = call.request;
  const Resolved& resolved = call.resolved;
  CallControl* ctl = call.control;
  const std::string digest = CreateArgsDigest(a);
  // The lookup and the capacity count: by name, then (nothing under the name) one list.
  absl::StatusOr<internal::Inventory> inv =
      internal::FindSandboxAndCount(*engine_, installation_, a.sandbox_id(), *ctl);
  if (!inv.ok()) {
    LogOpFailure("create", "lookup", inv.status().ToString());
    return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  }
  const Lookup& found = inv->sandbox;
  if (found.exists) {
    if (found.generation == generation_ && found.running && found.args_digest == digest) {
      return SandboxOk(a.sandbox_id(), found.id, pb::SANDBOX_STATE_RUNNING, *ctl);
    }
    return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  }
  // The bound holds whatever the concurrency: the other creates and starting resumes in flight
  // count beside the inventory (docs/protocol.md 22a).
  if (internal::CountWithInFlight(inv->counts.running, resolved.in_flight_sandbox_ids,
                                  a.sandbox_id()) > resolved.max_active) {
    return ErrorResponse(pb::ERROR_CODE_CAPACITY, *ctl);
  }
  if (resolved.native_image.empty()) return ErrorResponse(pb::ERROR_CODE_UNCONFIRMED, *ctl);
  if (internal::Expired(*ctl)) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);

  const json body = CreateBody(a, resolved.native_image, installation_, generation_, digest);
  ctl->native_started = true;
  absl::StatusOr<::sn::docker::HttpResponse> r = engine_->Request(
      "POST",
      absl::StrCat(kApi, "/containers/create?name=",
                   ::sn::docker::UrlEncode(ContainerName(a.sandbox_id()))),
      body.dump(), Options(*ctl));
  if (!r.ok()) {
    LogOpFailure("create", "create", r.status().ToString());
    return ErrorResponse(MutationTransportCode(r.status()), *ctl);
  }
  if (r->status == 409) return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);  // name taken: a race
  if (r->status == 404 || r->status == 400) {
    LogOpFailure("create", "create", absl::StrCat("http ", r->status));
    return ErrorResponse(pb::ERROR_CODE_FAILED, *ctl);  // no such image / refused config
  }
  if (r->status != 201) {
    LogOpFailure("create", "create", absl::StrCat("http ", r->status));
    return ErrorResponse(pb::ERROR_CODE_UNCERTAIN, *ctl);
  }
  const std::optional<std::string> created = internal::CreatedId(r->body);
  if (!created) return ErrorResponse(pb::ERROR_CODE_UNCERTAIN, *ctl);
  const std::string& id = *created;
  int http = 0;
  absl::Status started = StartContainer(*engine_, id, ctl, &http);
  if (!started.ok()) {
    LogOpFailure("create", "start", started.ToString());
    if (http == 0) return ErrorResponse(pb::ERROR_CODE_UNCERTAIN, *ctl);
    // The container exists (confirmed) but did not start: failed, with the receipt.
    pb::ExecuteResponse resp = ErrorResponse(pb::ERROR_CODE_FAILED, *ctl);
    pb::CreateSettled* s = resp.mutable_create_settled();
    s->set_request_id(req.request_id());
    s->set_sandbox_id(a.sandbox_id());
    s->set_native_id(id);
    s->set_generation(generation_);
    return resp;
  }
  return SandboxOk(a.sandbox_id(), id, pb::SANDBOX_STATE_RUNNING, *ctl);
}

pb::ExecuteResponse DockerOperations::Resume(const pb::ResumeArgs& a, const Call& call) {
  const Resolved& resolved = call.resolved;
  CallControl* ctl = call.control;
  absl::StatusOr<Lookup> found = FindSandbox(*engine_, installation_, a.sandbox_id(), *ctl);
  if (!found.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  if (!found->exists) return ErrorResponse(pb::ERROR_CODE_NOT_FOUND, *ctl);
  if (found->generation != generation_) return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  if (found->running) return SandboxOk(a.sandbox_id(), found->id, pb::SANDBOX_STATE_RUNNING, *ctl);
  if (a.reconciliation_only()) {
    return SandboxOk(a.sandbox_id(), found->id, pb::SANDBOX_STATE_RETAINED, *ctl);
  }
  {
    absl::StatusOr<internal::Counts> n = CountSandboxes(*engine_, installation_, *ctl);
    if (!n.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
    if (internal::CountWithInFlight(n->running, resolved.in_flight_sandbox_ids, a.sandbox_id()) >
        resolved.max_active) {
      return ErrorResponse(pb::ERROR_CODE_CAPACITY, *ctl);
    }
  }
  int http = 0;
  absl::Status started = StartContainer(*engine_, found->id, ctl, &http);
  if (!started.ok()) {
    LogOpFailure("resume", "start", started.ToString());
    if (http == 0) return ErrorResponse(MutationTransportCode(started), *ctl);
    return ErrorResponse(http >= 500 ? pb::ERROR_CODE_UNCERTAIN : pb::ERROR_CODE_FAILED, *ctl);
  }
  return SandboxOk(a.sandbox_id(), found->id, pb::SANDBOX_STATE_RUNNING, *ctl);
}

pb::ExecuteResponse DockerOperations::Kill(const pb::SandboxArgs& a, const Call& call) {
  return Stop(a, /*keep_state=*/false, call.control, call.resolved);
}

pb::ExecuteResponse DockerOperations::KillCompute(const pb::SandboxArgs& a, const Call& call) {
  return Stop(a, /*keep_state=*/true, call.control, call.resolved);
}

pb::ExecuteResponse DockerOperations::Stop(const pb::SandboxArgs& a, bool keep_state,
                                           CallControl* ctl, const Resolved& resolved) {
  const char* op = keep_state ? "kill_compute" : "kill";
  absl::StatusOr<Lookup> found = FindSandbox(*engine_, installation_, a.sandbox_id(), *ctl);
  if (!found.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  if (!found->exists) return ErrorResponse(pb::ERROR_CODE_NOT_FOUND, *ctl);
  if (found->generation != generation_) return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  if (keep_state && !found->running) return NoResultOk(*ctl);  // already retained
  if (keep_state) {
    absl::StatusOr<internal::Counts> n = CountSandboxes(*engine_, installation_, *ctl);
    if (!n.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
    if (internal::CountWithInFlight(n->retained, resolved.in_flight_sandbox_ids, a.sandbox_id()) >
        resolved.max_retained) {
      return ErrorResponse(pb::ERROR_CODE_CAPACITY, *ctl);
    }
  }
  ctl->native_started = true;
  std::string target = keep_state
                           ? absl::StrCat(kApi, "/containers/", found->id, "/stop?t=0")
                           : absl::StrCat(kApi, "/containers/", found->id, "?force=1&v=1");
  absl::StatusOr<::sn::docker::HttpResponse> r =
      engine_->Request(keep_state ? "POST" : "DELETE", target, "", Options(*ctl));
  if (!r.ok()) {
    LogOpFailure(op, op, r.status().ToString());
    return ErrorResponse(MutationTransportCode(r.status()), *ctl);
  }
  // 404 on removal: gone since the lookup, which is what kill wants.
  if (r->status == 204 || r->status == 304 || (!keep_state && r->status == 404)) {
    return NoResultOk(*ctl);
  }
  LogOpFailure(op, op, absl::StrCat("http ", r->status));
  return ErrorResponse(r->status >= 500 ? pb::ERROR_CODE_UNCERTAIN : pb::ERROR_CODE_FAILED, *ctl);
}

pb::ExecuteResponse DockerOperations::DeleteRetained(const pb::SandboxArgs& a,
                                                     const Call& call) {
  CallControl* ctl = call.control;
  absl::StatusOr<Lookup> found = FindSandbox(*engine_, installation_, a.sandbox_id(), *ctl);
  if (!found.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  if (!found->exists) return ErrorResponse(pb::ERROR_CODE_NOT_FOUND, *ctl);
  if (found->generation != generation_ || found->running) {
    return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  }
  ctl->native_started = true;
  // Without force: the daemon refuses (409) a container that started meanwhile.
  absl::StatusOr<::sn::docker::HttpResponse> r = engine_->Request(
      "DELETE", absl::StrCat(kApi, "/containers/", found->id, "?v=1"), "", Options(*ctl));
  if (!r.ok()) return ErrorResponse(MutationTransportCode(r.status()), *ctl);
  if (r->status == 204 || r->status == 404) return NoResultOk(*ctl);
  if (r->status == 409) return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  return ErrorResponse(r->status >= 500 ? pb::ERROR_CODE_UNCERTAIN : pb::ERROR_CODE_FAILED, *ctl);
}

pb::ExecuteResponse DockerOperations::Inspect(const pb::SandboxArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  absl::StatusOr<Lookup> found = FindSandbox(*engine_, installation_, a.sandbox_id(), *ctl);
  if (!found.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  if (!found->exists) return SandboxOk(a.sandbox_id(), "", pb::SANDBOX_STATE_ABSENT, *ctl);
  if (found->generation != generation_) return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  return SandboxOk(a.sandbox_id(), found->id,
                   found->running ? pb::SANDBOX_STATE_RUNNING : pb::SANDBOX_STATE_RETAINED, *ctl);
}

}  // namespace sn::native::docker

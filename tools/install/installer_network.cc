#include "tools/install/run.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/state/config.h"
#include "common/atomic_file.h"
#include "common/random.h"
#include "common/release/artifact.h"
#include "common/release/failure.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"
#include "privhelper/config.h"
#include "privhelper/store/installation.h"
#include "tools/install/fetch.h"
#include "tools/install/fetcher.h"
#include "tools/install/plan.h"
#include "tools/install/record.h"
#include "tools/install/system.h"

namespace sn::install::internal {

// The agent's user, then the network child running as it (before the first byte from Core).
absl::StatusOr<SystemUser> Run::StartNetworkChild() {
  ASSIGN_OR_RETURN(SystemUser user, EnsureSystemUser(opts.agent_user));
  if (user.created) {
    ++changes;
    say.Say(absl::StrCat("created the system user ", opts.agent_user));
  }
  FetcherOptions fo;
  fo.origin = origin;
  fo.ca_pem = ca_contents;
  fo.key = *key;
  fo.uid = user.uid;
  fo.gid = user.gid;
  fo.on_artifact_bytes = [this](const wire::RuntimeArtifact& a, uint64_t written) {
    if (std::optional<std::string> line = downloads.Line(a, written)) say.Say(*line);
  };
  ASSIGN_OR_RETURN(net, Fetcher::Start(std::move(fo)));
  return user;
}

// Step 2: the console's current release, read once; a resumed run keeps the one it pinned
// (the same manifest bytes, or a refusal).
absl::StatusOr<Run::PinnedHost> Run::PinHostRelease(Releases& console,
                                                    const std::optional<InstallRecord>& pending) {
  std::string source;
  if (pending.has_value()) {
    source = pending->host_source;
  } else {
    absl::StatusOr<std::string> current = net->Current();
    if (!current.ok()) {
      return absl::Status(
          current.status().code(),
          absl::StrCat("reading the console's current release: ", current.status().message()));
    }
    source = *current;
  }
  absl::StatusOr<release::VerifiedRelease> host = console.Metadata(source);
  if (!host.ok()) {
    if (absl::IsNotFound(host.status()) ||
        release::FailureClassOf(host.status()) == release::FailureClass::kProvenance) {
      return Refuse(
          absl::StrCat("the host program release ", source, ": ", host.status().message()));
    }
    return host.status();
  }
  if (pending.has_value() && Sha256Hex(host->manifest_bytes()) != pending->host_manifest_sha256) {
    return Refuse(absl::StrCat("the console's release ", source,
                               " is not the one this installation pinned (other manifest "
                               "bytes); a published release never changes"));
  }
  ASSIGN_OR_RETURN(std::vector<wire::RuntimeArtifact> artifacts, HostArtifacts(*host));
  say.Say(absl::StrCat("host program release ", source,
                       pending.has_value() ? " (pinned by the first run)"
                                           : " (the console's current release, pinned)",
                       ": manifest signature and SHA256SUMS verified"));
  return PinnedHost{std::move(source), *std::move(host), std::move(artifacts)};
}

// Every host artifact the installation installs (kinds agent, privhelper, native_helper and
// preparer), each exactly once; the first three are required.
absl::StatusOr<std::vector<wire::RuntimeArtifact>> Run::HostArtifacts(
    const release::VerifiedRelease& host) {
  std::vector<wire::RuntimeArtifact> out;
  std::set<std::string> kinds;
  for (const wire::RuntimeArtifact& a : host.manifest().artifacts) {
    if (InstalledName(a.kind).empty()) continue;
    if (!kinds.insert(a.kind).second) {
      return Refuse(absl::StrCat("the host program release ", host.manifest().source,
                                 " has more than one artifact of kind ", a.kind));
    }
    out.push_back(a);
  }
  for (const char* k : {"agent", "privhelper", "native_helper"}) {
    if (!kinds.count(k)) {
      return Refuse(absl::StrCat("the host program release ", host.manifest().source,
                                 " has no artifact of kind ", k));
    }
  }
  return out;
}

absl::StatusOr<InstallRecord> Run::EnrollNow(const std::string& host_source,
                                             const release::VerifiedRelease& host,
                                             const std::string& fingerprint) {
  // A host that already holds a node's state is not fresh: refuse before the token is spent.
  for (const std::string& p :
       {L.AgentState() + "/node/identity.json", L.AgentState() + "/node/enrollment.json",
        L.PrivhelperState() + "/" + privhelper::store::kInstallationFile}) {
    if (access(p.c_str(), F_OK) == 0) {
      return Refuse(absl::StrCat(p,
                                 " exists: this host already holds a node's state that "
                                 "this installer did not record; nothing was done"));
    }
  }
  ASSIGN_OR_RETURN(std::string installation_id, NewUuidV4());
  wire::EnrollRequest req;
  req.enrollment_token = opts.token;
  req.installation_id = installation_id;
  req.provider = opts.provider;
  req.backend_fingerprint =
      fingerprint.substr(0, std::min(fingerprint.size(), wire::kMaxBackendFingerprintBytes));
  req.max_active = privhelper::kDefaultMaxActive;
  req.max_retained = privhelper::kDefaultMaxRetained;
  req.generation_management = opts.generation_management;
  absl::StatusOr<wire::EnrollResponse> resp = net->Enroll(req);
  if (absl::IsFailedPrecondition(resp.status()))
    return Refuse(std::string(resp.status().message()));
  if (!resp.ok()) return resp.status();
  InstallRecord rec;
  rec.phase = Phase::kEnrolled;
  rec.core_origin = origin.text;
  rec.host_source = host_source;
  rec.host_manifest_sha256 = Sha256Hex(host.manifest_bytes());
  rec.installation_id = installation_id;
  rec.provider = opts.provider;
  rec.generation_management = opts.generation_management;
  rec.agent_user = opts.agent_user;
  rec.node_id = resp->node_id;
  rec.credential = resp->credential;
  rec.deployment_generation = resp->deployment_generation;
  rec.specification_digest = resp->specification_digest;
  rec.runtime_source = resp->runtime_source;
  // Durable before anything else: the token cannot be used again.
  RETURN_IF_ERROR(WriteFileAtomically(L.Pending(), EncodeInstallRecord(rec), 0600));
  say.Say(absl::StrCat("enrolled as node ", rec.node_id, " (generation ", rec.deployment_generation,
                       ", Runtime release ", rec.runtime_source, "); Core's answer is kept in ",
                       L.Pending()));
  return rec;
}

// Step 4, with --bundle: the bundle holds the very release the console verified, and every
// Runtime artifact it declares.
absl::Status Run::CheckBundle(BundleReleases& bundle, const wire::SpecificationDocument& doc,
                              const release::VerifiedRelease& runtime, const InstallRecord& rec) {
  absl::StatusOr<release::VerifiedRelease> local = bundle.Metadata(doc.runtime_source);
  if (absl::IsNotFound(local.status())) {
    const std::vector<std::string> held = bundle.Sources();
    return RefuseKeepingPending(
        L, absl::StrCat(
               "the bundle ", *opts.bundle, " holds only ",
               held.empty() ? std::string("no release") : "release(s) " + absl::StrJoin(held, ", "),
               ", not Runtime release ", doc.runtime_source, " that generation ",
               rec.deployment_generation, " names"));
  }
  if (!local.ok()) {
    return RefuseKeepingPending(L, absl::StrCat("the bundle's release ", doc.runtime_source,
                                                " fails verification: ", local.status().message()));
  }
  if (local->manifest_bytes() != runtime.manifest_bytes()) {
    return RefuseKeepingPending(L, absl::StrCat("the bundle's release ", doc.runtime_source,
                                                " is not the console's (other manifest bytes)"));
  }
  for (const wire::RuntimeArtifact& a : doc.artifacts) {
    absl::Status v =
        release::VerifyFile(absl::StrCat(*opts.bundle, "/", doc.runtime_source, "/", a.name), a);
    if (!v.ok()) {
      return RefuseKeepingPending(
          L, absl::StrCat("the bundle's Runtime artifact ", a.name, ": ", v.message()));
    }
  }
  return absl::OkStatus();
}

// Step 4: the exact Runtime, or a refusal with nothing written.
absl::StatusOr<ChecksumRecord> Run::CheckRuntime(BundleReleases* bundle, const InstallRecord& rec) {
  // The child fetched and verified the configuration (its digest is the enrolled one) and
  // hands over its fields; they are checked against the signed manifest below.
  absl::StatusOr<wire::SpecificationDocument> spec = net->Configuration(
      rec.credential, rec.deployment_generation, rec.specification_digest, rec.provider);
  if (absl::IsNotFound(spec.status())) {
    return RefuseKeepingPending(L, std::string(spec.status().message()));
  }
  if (absl::IsFailedPrecondition(spec.status())) {
    return RefuseKeepingPending(
        L, absl::StrCat("generation ", rec.deployment_generation,
                        "'s configuration fails verification (configuration_invalid): ",
                        spec.status().message()));
  }
  if (!spec.ok()) return spec.status();
  const wire::SpecificationDocument& doc = *spec;
  if (doc.runtime_source != rec.runtime_source) {
    return RefuseKeepingPending(
        L, absl::StrCat("the enrollment named Runtime release ", rec.runtime_source,
                        " but generation ", rec.deployment_generation, "'s configuration names ",
                        doc.runtime_source));
  }
  absl::StatusOr<release::VerifiedRelease> runtime = net->Metadata(doc.runtime_source);
  if (absl::IsNotFound(runtime.status())) {
    return RefuseKeepingPending(
        L, absl::StrCat("the console does not retain Runtime release ", doc.runtime_source,
                        " that generation ", rec.deployment_generation, " names (",
                        runtime.status().message(), "); the current Runtime is never substituted"));
  }
  if (!runtime.ok()) {
    if (release::FailureClassOf(runtime.status()) == release::FailureClass::kTransfer) {
      return runtime.status();
    }
    return RefuseKeepingPending(L,
                                absl::StrCat("Runtime release ", doc.runtime_source,
                                             " fails verification: ", runtime.status().message()));
  }
  absl::Status matches = release::CheckSpecificationAgainstManifest(doc, runtime->manifest());
  if (!matches.ok()) {
    return RefuseKeepingPending(L,
                                absl::StrCat("generation ", rec.deployment_generation,
                                             " disagrees with its release: ", matches.message()));
  }
  if (bundle != nullptr) RETURN_IF_ERROR(CheckBundle(*bundle, doc, *runtime, rec));
  ChecksumRecord record;
  record.source = doc.runtime_source;
  record.manifest_sha256 = Sha256Hex(runtime->manifest_bytes());
  record.generation = rec.deployment_generation;
  record.specification_digest = rec.specification_digest;
  for (const wire::RuntimeArtifact& a : doc.artifacts) record.files.push_back({a, ""});
  record.images = doc.images;
  say.Say(absl::StrCat("Runtime release ", doc.runtime_source, " verified for generation ",
                       rec.deployment_generation, " (", doc.artifacts.size(),
                       " artifact(s) declared, signature and SHA256SUMS checked)",
                       bundle != nullptr ? "; the bundle holds the same release" : ""));
  return record;
}

// Step 5: the host program's files, from the bundle when it holds the very same release.
absl::StatusOr<std::vector<HostBinary>> Run::StageHostFiles(Releases& console,
                                                            std::optional<BundleReleases>& bundle,
                                                            const PinnedHost& host) {
  Releases* from = &console;
  bool from_bundle = false;
  if (bundle.has_value()) {
    absl::StatusOr<release::VerifiedRelease> local = bundle->Metadata(host.source);
    if (local.ok() && local->manifest_bytes() == host.release.manifest_bytes()) {
      from = &*bundle;
      from_bundle = true;
    }
  }
  return StageHost(*from, host.source, host.artifacts, from_bundle);
}

// Step 5.
absl::StatusOr<std::vector<HostBinary>> Run::StageHost(
    Releases& from, const std::string& source, const std::vector<wire::RuntimeArtifact>& arts,
    bool from_bundle) {
  RETURN_IF_ERROR(MakeDirs(L.Downloads(), 0700));
  std::vector<HostBinary> out;
  for (const wire::RuntimeArtifact& a : arts) {
    const std::string staged = absl::StrCat(L.Downloads(), "/", a.name);
    if (!release::VerifyFile(staged, a).ok()) {
      absl::Status s = from.Artifact(source, a, staged);
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat("host program artifact ", a.name, " of release ",
                                                   source, ": ", s.message()));
      }
      say.Say(absl::StrCat(from_bundle ? "copied " : "downloaded ", a.kind, " ", a.name, " (",
                           a.size, " bytes, sha256 ", a.sha256, ") of release ", source,
                           from_bundle ? " from the bundle" : "", ", verified"));
    }
    out.push_back({a, staged});
  }
  return out;
}

}  // namespace sn::install::internal

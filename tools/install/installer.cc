#include "tools/install/installer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/state/config.h"
#include "agent/state/state_files.h"
#include "common/atomic_file.h"
#include "common/random.h"
#include "common/release/artifact.h"
#include "common/release/failure.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"
#include "nlohmann/json.hpp"
#include "privhelper/config.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/probe.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/state_dir.h"
#include "tools/install/agent_state.h"
#include "tools/install/apply.h"
#include "tools/install/fetch.h"
#include "tools/install/fetcher.h"
#include "tools/install/plan.h"
#include "tools/install/record.h"
#include "tools/install/system.h"

namespace sn::install {
namespace {

constexpr char kProvider[] = "docker";
constexpr absl::Duration kPrivhelperStart = absl::Seconds(30);

class Narrator {
 public:
  explicit Narrator(std::FILE* out) : out_(out) {}
  void Say(std::string_view line) {
    std::fprintf(out_, "sandbox-node-install: %.*s\n", static_cast<int>(line.size()), line.data());
    std::fflush(out_);
  }
  std::FILE* out() { return out_; }

 private:
  std::FILE* out_;
};

// A refusal after enrollment: what is kept and how to go on.
absl::Status RefuseKeepingPending(const Layout& L, std::string_view why) {
  return Refuse(
      absl::StrCat(std::string(why),
                   ". Nothing was installed: no node identity, no Runtime imported, the node "
                   "never connected and no service started; Core's enrollment answer is kept in ",
                   L.Pending(), ", so a later run resumes without a new token"));
}

// ---- the run ----------------------------------------------------------------------------

struct Run {
  const Options& opts;
  Narrator say;
  Layout L;
  std::optional<release::PublicKey> key;
  agent::Origin origin;
  std::optional<std::string> ca_contents;  // for the network child, and copied for the agent
  // Every exchange with Core goes through this child (fetcher.h): root never runs the TLS,
  // HTTP or JSON code on Core's answers.
  std::unique_ptr<Fetcher> net;
  bool systemd = false;                    // systemd is PID 1 and no --root
  int changes = 0;

  Run(const Options& o, std::FILE* out) : opts(o), say(out) {}

  absl::Status Prepare() {
    ASSIGN_OR_RETURN(L, MakeLayout(opts.root));
    absl::StatusOr<release::PublicKey> k = release::PublicKey::FromBase64(opts.release_public_key);
    if (!k.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--release-public-key: ", k.status().message()));
    }
    key = *k;
    absl::StatusOr<agent::Origin> o =
        agent::ParseOrigin(opts.core_origin, opts.insecure_allow_http);
    if (!o.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--core-origin: ", o.status().message()));
    }
    origin = *o;
    if (opts.ca_bundle.has_value()) {
      absl::StatusOr<std::string> pem = ReadSmallFile(*opts.ca_bundle);
      if (!pem.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--ca-bundle: ", pem.status().message()));
      }
      ca_contents = *pem;
    }
    if (opts.agent_user.empty()) return absl::InvalidArgumentError("--agent-user is empty");
    if (opts.token.empty()) return absl::InvalidArgumentError("the enrollment token is empty");
    systemd = L.root.empty() && SystemdIsPid1();
    return absl::OkStatus();
  }

  // Options that must agree with what an earlier run recorded.
  absl::Status SameOptions(const InstallRecord& r, const std::string& file) {
    std::vector<std::string> differ;
    if (r.core_origin != origin.text) differ.push_back("--core-origin " + r.core_origin);
    if (r.agent_user != opts.agent_user) differ.push_back("--agent-user " + r.agent_user);
    if (r.generation_management != opts.generation_management) {
      differ.push_back(r.generation_management ? "--generation-management"
                                               : "no --generation-management");
    }
    if (differ.empty()) return absl::OkStatus();
    return Refuse(absl::StrCat(file, " records an installation with ", absl::StrJoin(differ, ", "),
                               "; run with the same options"));
  }

  absl::StatusOr<std::optional<InstallRecord>> ReadRecord(const std::string& path) {
    absl::StatusOr<std::string> text = ReadSmallFile(path, kMaxRecordBytes);
    if (absl::IsNotFound(text.status())) return std::optional<InstallRecord>();
    if (!text.ok()) return text.status();
    absl::StatusOr<InstallRecord> r = DecodeInstallRecord(*text);
    if (!r.ok()) {
      return Refuse(absl::StrCat(path, " is unreadable (", r.status().message(),
                                 "); it is kept for inspection"));
    }
    return std::optional<InstallRecord>(*std::move(r));
  }

  // Every host artifact the installation installs (kinds agent, privhelper, native_helper and
  // preparer), each exactly once; the first three are required.
  absl::StatusOr<std::vector<wire::RuntimeArtifact>> HostArtifacts(
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

  absl::StatusOr<InstallRecord> EnrollNow(const std::string& host_source,
                                          const release::VerifiedRelease& host) {
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
    docker::BeastDockerEngine engine(opts.docker_socket);
    privhelper::ProbeResult probe = docker::ProbeDocker(engine);
    if (!probe.ready) {
      say.Say(absl::StrCat("warning: the Docker daemon at ", opts.docker_socket,
                           " is not ready; enrolling anyway"));
    }
    wire::EnrollRequest req;
    req.enrollment_token = opts.token;
    req.installation_id = installation_id;
    req.provider = kProvider;
    req.backend_fingerprint = probe.fingerprint.substr(
        0, std::min(probe.fingerprint.size(), wire::kMaxBackendFingerprintBytes));
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
    rec.provider = kProvider;
    rec.generation_management = opts.generation_management;
    rec.agent_user = opts.agent_user;
    rec.node_id = resp->node_id;
    rec.credential = resp->credential;
    rec.deployment_generation = resp->deployment_generation;
    rec.specification_digest = resp->specification_digest;
    rec.runtime_source = resp->runtime_source;
    // Durable before anything else: the token cannot be used again.
    RETURN_IF_ERROR(WriteFileAtomically(L.Pending(), EncodeInstallRecord(rec), 0600));
    say.Say(absl::StrCat("enrolled as node ", rec.node_id, " (generation ",
                         rec.deployment_generation, ", Runtime release ", rec.runtime_source,
                         "); Core's answer is kept in ", L.Pending()));
    return rec;
  }

  // Step 4: the exact Runtime, or a refusal with nothing written.
  absl::StatusOr<ChecksumRecord> CheckRuntime(BundleReleases* bundle, const InstallRecord& rec) {
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
          L,
          absl::StrCat("the console does not retain Runtime release ", doc.runtime_source,
                       " that generation ", rec.deployment_generation, " names (",
                       runtime.status().message(), "); the current Runtime is never substituted"));
    }
    if (!runtime.ok()) {
      if (release::FailureClassOf(runtime.status()) == release::FailureClass::kTransfer) {
        return runtime.status();
      }
      return RefuseKeepingPending(
          L, absl::StrCat("Runtime release ", doc.runtime_source,
                          " fails verification: ", runtime.status().message()));
    }
    absl::Status matches = release::CheckSpecificationAgainstManifest(doc, runtime->manifest());
    if (!matches.ok()) {
      return RefuseKeepingPending(L,
                                  absl::StrCat("generation ", rec.deployment_generation,
                                               " disagrees with its release: ", matches.message()));
    }
    if (bundle != nullptr) {
      absl::StatusOr<release::VerifiedRelease> local = bundle->Metadata(doc.runtime_source);
      if (absl::IsNotFound(local.status())) {
        const std::vector<std::string> held = bundle->Sources();
        return RefuseKeepingPending(
            L, absl::StrCat("the bundle ", *opts.bundle, " holds only ",
                            held.empty() ? std::string("no release")
                                         : "release(s) " + absl::StrJoin(held, ", "),
                            ", not Runtime release ", doc.runtime_source, " that generation ",
                            rec.deployment_generation, " names"));
      }
      if (!local.ok()) {
        return RefuseKeepingPending(
            L, absl::StrCat("the bundle's release ", doc.runtime_source,
                            " fails verification: ", local.status().message()));
      }
      if (local->manifest_bytes() != runtime->manifest_bytes()) {
        return RefuseKeepingPending(L,
                                    absl::StrCat("the bundle's release ", doc.runtime_source,
                                                 " is not the console's (other manifest bytes)"));
      }
      for (const wire::RuntimeArtifact& a : doc.artifacts) {
        absl::Status v = release::VerifyFile(
            absl::StrCat(*opts.bundle, "/", doc.runtime_source, "/", a.name), a);
        if (!v.ok()) {
          return RefuseKeepingPending(
              L, absl::StrCat("the bundle's Runtime artifact ", a.name, ": ", v.message()));
        }
      }
    }
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

  // Step 5.
  absl::StatusOr<std::vector<HostBinary>> StageHost(Releases& from, const std::string& source,
                                                    const std::vector<wire::RuntimeArtifact>& arts,
                                                    bool from_bundle) {
    RETURN_IF_ERROR(MakeDirs(L.Downloads(), 0700));
    std::vector<HostBinary> out;
    for (const wire::RuntimeArtifact& a : arts) {
      const std::string staged = absl::StrCat(L.Downloads(), "/", a.name);
      if (!release::VerifyFile(staged, a).ok()) {
        absl::Status s = from.Artifact(source, a, staged);
        if (!s.ok()) {
          return absl::Status(s.code(), absl::StrCat("host program artifact ", a.name,
                                                     " of release ", source, ": ", s.message()));
        }
        say.Say(absl::StrCat(from_bundle ? "copied " : "downloaded ", a.kind, " ", a.name, " (",
                             a.size, " bytes, sha256 ", a.sha256, ") of release ", source,
                             from_bundle ? " from the bundle" : "", ", verified"));
      }
      out.push_back({a, staged});
    }
    return out;
  }

  // Step 7a: privhelper's installation identity is the one enrolled.
  absl::Status EnsureInstallationId(const std::string& id) {
    privhelper::store::PosixFs& fs = *privhelper::store::PosixFs::Get();
    ASSIGN_OR_RETURN(privhelper::store::Dir state,
                     privhelper::store::OpenStateDir(fs, L.PrivhelperState(), 0));
    nlohmann::json doc = {{"schema", 1}, {"installation_id", id}};
    absl::Status published = privhelper::store::PublishOnce(
        fs, state, privhelper::store::kInstallationFile, doc.dump() + "\n");
    if (published.ok()) {
      ++changes;
      return absl::OkStatus();
    }
    if (!absl::IsAlreadyExists(published)) return published;
    ASSIGN_OR_RETURN(std::string have, privhelper::store::LoadOrCreateInstallationId(fs, state, 0));
    if (have != id) {
      return Refuse(absl::StrCat(L.PrivhelperState(), "/", privhelper::store::kInstallationFile,
                                 " holds installation ", have, ", but the node was enrolled as ",
                                 id));
    }
    return absl::OkStatus();
  }

  // Step 7b (agent_state.h). True when the node identity already exists (and is the enrolled
  // node); otherwise the pending enrollment is in place.
  absl::StatusOr<bool> EnsureAgentState(const InstallRecord& rec, const SystemUser& user) {
    ASSIGN_OR_RETURN(AgentState state, EnsureAgentStateAs(L.AgentState(), rec, user));
    if (state == AgentState::kWrotePending) {
      ++changes;
      say.Say(absl::StrCat("wrote the agent's pending enrollment in ", L.AgentState(), "/node (as ",
                           opts.agent_user, ")"));
    }
    return state == AgentState::kEnrolled;
  }

  // Step 8.
  absl::Status FinishEnrollment(const SystemUser& user) {
    std::optional<pid_t> child;
    if (systemd) {
      ASSIGN_OR_RETURN(int rc, RunCommand({"/bin/systemctl", "daemon-reload"}));
      ASSIGN_OR_RETURN(rc, RunCommand({"/bin/systemctl", "enable", "--now", kPrivhelperUnitName}));
      if (rc != 0) {
        return absl::UnavailableError(
            absl::StrCat("systemctl enable --now ", kPrivhelperUnitName, " exited with ", rc));
      }
    } else {
      unlink(L.Socket().c_str());  // left by a privhelper an interrupted run started
      const std::string log = L.InstallDir() + "/privhelper-enroll.log";
      ASSIGN_OR_RETURN(pid_t pid,
                       Spawn({L.Binary("privhelper"), "--config=" + L.PrivhelperConfig()}, log));
      child = pid;
      const absl::Time deadline = absl::Now() + kPrivhelperStart;
      struct stat st;
      while (lstat(L.Socket().c_str(), &st) != 0) {
        if (!ChildAlive(pid) || absl::Now() > deadline) {
          if (ChildAlive(pid)) StopChild(pid);
          return absl::UnavailableError(absl::StrCat("privhelper did not open its socket ",
                                                     L.Socket(), " (its log: ", log, ")"));
        }
        usleep(50 * 1000);
      }
    }
    say.Say(
        "finishing the enrollment: agent enroll --resume (imports the enrolled generation "
        "through privhelper)");
    absl::StatusOr<int> rc =
        RunCommand({L.Binary("agent"), "enroll", "--config=" + L.AgentConfig(), "--resume"},
                   std::make_pair(user.uid, user.gid));
    if (child.has_value()) StopChild(*child);
    if (!rc.ok()) return rc.status();
    if (*rc != 0) {
      return absl::UnavailableError(
          absl::StrCat("agent enroll --resume exited with ", *rc,
                       " (its log above says why); run the installer again to finish"));
    }
    ++changes;
    return absl::OkStatus();
  }

  absl::Status StartOrPrint() {
    if (systemd) {
      int started = 0;
      for (const char* unit : {kPrivhelperUnitName, kAgentUnitName}) {
        ASSIGN_OR_RETURN(int active, RunCommand({"/bin/systemctl", "is-active", "--quiet", unit}));
        ASSIGN_OR_RETURN(int enabled,
                         RunCommand({"/bin/systemctl", "is-enabled", "--quiet", unit}));
        if (active == 0 && enabled == 0) continue;
        ASSIGN_OR_RETURN(int rc, RunCommand({"/bin/systemctl", "enable", "--now", unit}));
        if (rc != 0) {
          return absl::UnavailableError(
              absl::StrCat("systemctl enable --now ", unit, " exited with ", rc));
        }
        ++started;
      }
      changes += started;
      if (started > 0)
        say.Say("enabled and started sandbox-node-privhelper and sandbox-node-agent");
      return absl::OkStatus();
    }
    say.Say(L.root.empty()
                ? "systemd is not PID 1 here: the units are installed but not enabled or started."
                : absl::StrCat("installed under --root=", L.root,
                               ": systemd does not see these units, so they are not enabled "
                               "or started."));
    say.Say("start both processes by hand (as root), privhelper first:");
    std::fprintf(say.out(), "  %s\n  %s\n", PrivhelperCommand(L).c_str(),
                 AgentCommand(L, opts.agent_user).c_str());
    std::fflush(say.out());
    return absl::OkStatus();
  }

  PlanInputs Inputs(const SystemUser& user, std::vector<HostBinary> binaries,
                    std::string host_record, std::string runtime_record) {
    PlanInputs in;
    in.layout = L;
    in.core_origin = origin.text;
    in.insecure_allow_http = opts.insecure_allow_http;
    in.generation_management = opts.generation_management;
    in.ca_bundle = ca_contents;
    in.release_public_key = opts.release_public_key;
    in.docker_socket = opts.docker_socket;
    in.agent_user = opts.agent_user;
    in.agent_uid = user.uid;
    in.agent_gid = user.gid;
    in.binaries = std::move(binaries);
    in.host_record = std::move(host_record);
    in.runtime_record = std::move(runtime_record);
    return in;
  }

  absl::Status ApplyPlan(const PlanInputs& in, bool check_only) {
    int created = 0;
    const std::vector<Step> steps = PlanFiles(in);
    for (const Step& s : steps) {
      ASSIGN_OR_RETURN(Outcome o, Apply(s, check_only));
      if (o == Outcome::kCreated) {
        ++created;
        say.Say(absl::StrCat("created ", s.path));
      }
    }
    changes += created;
    if (created < static_cast<int>(steps.size())) {
      say.Say(absl::StrCat(steps.size() - static_cast<size_t>(created),
                           " planned file(s) and directories were already in place, unchanged"));
    }
    return absl::OkStatus();
  }

  // Step 1 for an installed host.
  absl::Status CheckInstalled(const InstallRecord& rec) {
    RETURN_IF_ERROR(SameOptions(rec, L.Installed()));
    ASSIGN_OR_RETURN(std::string host_text, ReadSmallFile(L.HostRecord(), kMaxRecordBytes));
    absl::StatusOr<ChecksumRecord> host = DecodeChecksumRecord(host_text, false);
    if (!host.ok()) return Refuse(absl::StrCat(L.HostRecord(), ": ", host.status().message()));
    ASSIGN_OR_RETURN(std::string runtime_text, ReadSmallFile(L.RuntimeRecord(), kMaxRecordBytes));
    absl::StatusOr<ChecksumRecord> runtime = DecodeChecksumRecord(runtime_text, true);
    if (!runtime.ok()) {
      return Refuse(absl::StrCat(L.RuntimeRecord(), ": ", runtime.status().message()));
    }
    ASSIGN_OR_RETURN(SystemUser user, EnsureSystemUser(opts.agent_user));
    if (user.created) {
      ++changes;
      say.Say(absl::StrCat("created the system user ", opts.agent_user));
    }
    std::vector<HostBinary> binaries;
    for (const RecordedFile& f : host->files) binaries.push_back({f.artifact, ""});
    RETURN_IF_ERROR(ApplyPlan(Inputs(user, binaries, host_text, runtime_text), true));
    ASSIGN_OR_RETURN(bool identity, EnsureAgentState(rec, user));
    if (!identity) return Refuse("the node identity is missing from an installed node");
    RETURN_IF_ERROR(EnsureInstallationId(rec.installation_id));
    RETURN_IF_ERROR(StartOrPrint());
    say.Say(changes == 0
                ? absl::StrCat("already installed as node ", rec.node_id, " (host program release ",
                               rec.host_source, "): nothing changed")
                : absl::StrCat("already installed as node ", rec.node_id, ": ", changes,
                               " change(s) made"));
    return absl::OkStatus();
  }

  // A resumed run's pending record, checked: enrolled, and for the same options.
  absl::StatusOr<std::optional<InstallRecord>> ReadPending() {
    ASSIGN_OR_RETURN(std::optional<InstallRecord> pending, ReadRecord(L.Pending()));
    if (!pending.has_value()) return pending;
    if (pending->phase != Phase::kEnrolled) {
      return Refuse(absl::StrCat(L.Pending(), " is not an enrolled record"));
    }
    RETURN_IF_ERROR(SameOptions(*pending, L.Pending()));
    say.Say(absl::StrCat("resuming the installation of node ", pending->node_id,
                         " (enrolled earlier: the token is not used again)"));
    return pending;
  }

  // The agent's user, then the network child running as it (before the first byte from Core).
  absl::StatusOr<SystemUser> StartNetworkChild() {
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
    ASSIGN_OR_RETURN(net, Fetcher::Start(std::move(fo)));
    return user;
  }

  struct PinnedHost {
    std::string source;
    release::VerifiedRelease release;
    std::vector<wire::RuntimeArtifact> artifacts;
  };

  // Step 2: the console's current release, read once; a resumed run keeps the one it pinned
  // (the same manifest bytes, or a refusal).
  absl::StatusOr<PinnedHost> PinHostRelease(Releases& console,
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

  // Step 5: the host program's files, from the bundle when it holds the very same release.
  absl::StatusOr<std::vector<HostBinary>> StageHostFiles(Releases& console,
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

  // Step 6: the binaries, checksum records, configuration files and units, each configuration
  // checked first by its own process's parser.
  absl::Status InstallFiles(const SystemUser& user, const std::vector<HostBinary>& binaries,
                            const PinnedHost& host, const ChecksumRecord& runtime) {
    ChecksumRecord host_record;
    host_record.source = host.source;
    host_record.manifest_sha256 = Sha256Hex(host.release.manifest_bytes());
    for (const HostBinary& b : binaries) {
      host_record.files.push_back({b.artifact, L.Binary(InstalledName(b.artifact.kind))});
    }
    const PlanInputs in = Inputs(user, binaries, EncodeChecksumRecord(host_record, false),
                                 EncodeChecksumRecord(runtime, true));
    if (absl::StatusOr<agent::AgentConfig> c = agent::ParseConfig(RenderAgentConfig(in)); !c.ok()) {
      return absl::InternalError(absl::StrCat("the agent's configuration: ", c.status().message()));
    }
    if (absl::StatusOr<privhelper::Config> c = privhelper::ParseConfig(RenderPrivhelperConfig(in));
        !c.ok()) {
      return absl::InternalError(
          absl::StrCat("privhelper's configuration: ", c.status().message()));
    }
    return ApplyPlan(in, false);
  }

  // Steps 7 and 8: the installation identity, then the agent's node identity (finishing the
  // enrollment with `agent enroll --resume` when it is not there yet).
  absl::Status EnsureIdentities(const InstallRecord& rec, const SystemUser& user) {
    RETURN_IF_ERROR(EnsureInstallationId(rec.installation_id));
    ASSIGN_OR_RETURN(bool identity, EnsureAgentState(rec, user));
    if (identity) return absl::OkStatus();
    RETURN_IF_ERROR(FinishEnrollment(user));
    ASSIGN_OR_RETURN(identity, EnsureAgentState(rec, user));
    if (!identity) {
      return absl::UnavailableError(
          "agent enroll --resume succeeded but wrote no node identity; run the installer again");
    }
    return absl::OkStatus();
  }

  // Step 9: the installed record (no credential) replaces the pending one, durably; the
  // staged downloads go.
  absl::Status RecordInstalled(const InstallRecord& rec, const std::vector<HostBinary>& binaries) {
    InstallRecord done = rec;
    done.phase = Phase::kInstalled;
    done.credential.clear();
    RETURN_IF_ERROR(WriteFileAtomically(L.Installed(), EncodeInstallRecord(done), 0600));
    if (unlink(L.Pending().c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus(errno, "unlink " + L.Pending());
    }
    RETURN_IF_ERROR(SyncDirectory(L.InstallDir()));
    for (const HostBinary& b : binaries) unlink(b.staged.c_str());
    rmdir(L.Downloads().c_str());
    return absl::OkStatus();
  }

  // The steps of docs/operator-guide.md's installation, in order; every step is a no-op or a
  // refusal on a rerun (CheckInstalled) and resumes from the pending record after a failure.
  absl::Status Main() {
    RETURN_IF_ERROR(Prepare());
    RETURN_IF_ERROR(MakeDirs(L.VarDir(), 0755));
    RETURN_IF_ERROR(MakeDirs(L.InstallDir(), 0700));
    RETURN_IF_ERROR(TakeInstallLock(L.Lock()));

    ASSIGN_OR_RETURN(std::optional<InstallRecord> installed, ReadRecord(L.Installed()));
    if (installed.has_value()) return CheckInstalled(*installed);
    ASSIGN_OR_RETURN(std::optional<InstallRecord> pending, ReadPending());

    ASSIGN_OR_RETURN(SystemUser user, StartNetworkChild());
    FetcherReleases console(net.get());
    std::optional<BundleReleases> bundle;
    if (opts.bundle.has_value()) bundle.emplace(*opts.bundle, &*key);
    ASSIGN_OR_RETURN(PinnedHost host, PinHostRelease(console, pending));

    // Step 3.
    InstallRecord rec;
    if (pending.has_value()) {
      rec = *pending;
    } else {
      ASSIGN_OR_RETURN(rec, EnrollNow(host.source, host.release));
    }
    // Step 4.
    ASSIGN_OR_RETURN(ChecksumRecord runtime,
                     CheckRuntime(bundle.has_value() ? &*bundle : nullptr, rec));
    ASSIGN_OR_RETURN(std::vector<HostBinary> binaries, StageHostFiles(console, bundle, host));
    // Core is not needed any more: the network child exits (root closes its socketpair).
    net.reset();

    RETURN_IF_ERROR(InstallFiles(user, binaries, host, runtime));
    RETURN_IF_ERROR(EnsureIdentities(rec, user));
    RETURN_IF_ERROR(RecordInstalled(rec, binaries));

    // Step 10.
    RETURN_IF_ERROR(StartOrPrint());
    say.Say(absl::StrCat("installed node ", rec.node_id, " (generation ", rec.deployment_generation,
                         ", host program release ", host.source, ", Runtime release ",
                         runtime.source, ")"));
    return absl::OkStatus();
  }
};

}  // namespace

absl::Status Install(const Options& options, std::FILE* out) {
  umask(022);
  Run run(options, out);
  return run.Main();
}

}  // namespace sn::install

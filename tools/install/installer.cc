#include "tools/install/installer.h"

#include <sys/stat.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/state/config.h"
#include "common/atomic_file.h"
#include "common/release/artifact.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"
#include "privhelper/config.h"
#include "tools/install/apply.h"
#include "tools/install/fetch.h"
#include "tools/install/fetcher.h"
#include "tools/install/plan.h"
#include "tools/install/record.h"
#include "tools/install/system.h"

#include "tools/install/run.h"

namespace sn::install {
namespace internal {

absl::Status RefuseKeepingPending(const Layout& L, std::string_view why) {
  return Refuse(
      absl::StrCat(std::string(why),
                   ". Nothing was installed: no node identity, no Runtime imported, the node "
                   "never connected and no service started; Core's enrollment answer is kept in ",
                   L.Pending(), ", so a later run resumes without a new token"));
}

absl::Status Run::Prepare() {
  ASSIGN_OR_RETURN(L, MakeLayout(opts.root));
  absl::StatusOr<release::PublicKey> k = release::PublicKey::FromBase64(opts.release_public_key);
  if (!k.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--release-public-key: ", k.status().message()));
  }
  key = *k;
  absl::StatusOr<agent::Origin> o = agent::ParseOrigin(opts.core_origin, opts.insecure_allow_http);
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
  if (opts.provider != "docker" && opts.provider != "microvm") {
    return absl::InvalidArgumentError("--provider: must be docker or microvm");
  }
  if (opts.provider == "microvm") {
    if (opts.microvm_accel != "auto" && opts.microvm_accel != "kvm" && opts.microvm_accel != "tcg") {
      return absl::InvalidArgumentError("--microvm-accel: must be auto, kvm or tcg");
    }
    if (opts.vm_user.empty() || opts.vm_user == opts.agent_user) {
      return absl::InvalidArgumentError("--vm-user: must be a user other than the agent's");
    }
    if (L.VmStore().size() > privhelper::kMaxMicrovmStoreDir) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--root: the VM store ", L.VmStore(), " would be longer than ",
          privhelper::kMaxMicrovmStoreDir,
          " bytes (each VM's channel socket beneath it must fit a unix socket's 107); use a "
          "shorter --root"));
    }
  }
  if (opts.token.empty()) return absl::InvalidArgumentError("the enrollment token is empty");
  systemd = L.root.empty() && SystemdIsPid1();
  return absl::OkStatus();
}

// Options that must agree with what an earlier run recorded.
absl::Status Run::SameOptions(const InstallRecord& r, const std::string& file) {
  std::vector<std::string> differ;
  if (r.core_origin != origin.text) differ.push_back("--core-origin " + r.core_origin);
  if (r.agent_user != opts.agent_user) differ.push_back("--agent-user " + r.agent_user);
  if (r.provider != opts.provider) differ.push_back("--provider=" + r.provider);
  if (r.generation_management != opts.generation_management) {
    differ.push_back(r.generation_management ? "--generation-management"
                                             : "no --generation-management");
  }
  if (differ.empty()) return absl::OkStatus();
  return Refuse(absl::StrCat(file, " records an installation with ", absl::StrJoin(differ, ", "),
                             "; run with the same options"));
}

absl::StatusOr<std::optional<InstallRecord>> Run::ReadRecord(const std::string& path) {
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

PlanInputs Run::Inputs(const SystemUser& user, std::vector<HostBinary> binaries,
                       std::string host_record, std::string runtime_record) {
  PlanInputs in;
  in.layout = L;
  in.core_origin = origin.text;
  in.insecure_allow_http = opts.insecure_allow_http;
  in.generation_management = opts.generation_management;
  in.ca_bundle = ca_contents;
  in.release_public_key = opts.release_public_key;
  in.provider = opts.provider;
  in.docker_socket = opts.docker_socket;
  in.microvm = vm;
  in.agent_user = opts.agent_user;
  in.agent_uid = user.uid;
  in.agent_gid = user.gid;
  in.binaries = std::move(binaries);
  in.host_record = std::move(host_record);
  in.runtime_record = std::move(runtime_record);
  return in;
}

absl::Status Run::ApplyPlan(const PlanInputs& in, bool check_only) {
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
absl::Status Run::CheckInstalled(const InstallRecord& rec) {
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
  RETURN_IF_ERROR(EnsureVmUser(user));
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
absl::StatusOr<std::optional<InstallRecord>> Run::ReadPending() {
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

// The steps of docs/operator-guide.md's installation, in order; every step is a no-op or a
// refusal on a rerun (CheckInstalled) and resumes from the pending record after a failure.
absl::Status Run::Main() {
  RETURN_IF_ERROR(Prepare());
  RETURN_IF_ERROR(MakeDirs(L.VarDir(), 0755));
  RETURN_IF_ERROR(MakeDirs(L.InstallDir(), 0700));
  RETURN_IF_ERROR(TakeInstallLock(L.Lock()));

  ASSIGN_OR_RETURN(std::optional<InstallRecord> installed, ReadRecord(L.Installed()));
  if (installed.has_value()) return CheckInstalled(*installed);
  ASSIGN_OR_RETURN(std::optional<InstallRecord> pending, ReadPending());
  // Step 0: a provider this host cannot run is refused before the token is spent.
  ASSIGN_OR_RETURN(std::string fingerprint, ProbeProvider());

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
    ASSIGN_OR_RETURN(rec, EnrollNow(host.source, host.release, fingerprint));
  }
  // Step 4.
  ASSIGN_OR_RETURN(ChecksumRecord runtime,
                   CheckRuntime(bundle.has_value() ? &*bundle : nullptr, rec));
  ASSIGN_OR_RETURN(std::vector<HostBinary> binaries, StageHostFiles(console, bundle, host));
  // Core is not needed any more: the network child exits (root closes its socketpair).
  net.reset();

  RETURN_IF_ERROR(EnsureVmUser(user));
  RETURN_IF_ERROR(InstallFiles(user, binaries, host, runtime));
  RETURN_IF_ERROR(EnsureIdentities(rec, user));
  RETURN_IF_ERROR(RecordInstalled(rec, binaries));

  // Step 10.
  RETURN_IF_ERROR(StartOrPrint());
  say.Say(absl::StrCat("installed node ", rec.node_id, " (generation ", rec.deployment_generation,
                       ", host program release ", host.source, ", Runtime release ", runtime.source,
                       ")"));
  return absl::OkStatus();
}

}  // namespace internal

absl::Status Install(const Options& options, std::FILE* out) {
  umask(022);
  internal::Run run(options, out);
  return run.Main();
}

}  // namespace sn::install

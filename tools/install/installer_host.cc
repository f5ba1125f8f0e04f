#include "tools/install/run.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/state/config.h"
#include "common/atomic_file.h"
#include "common/release/artifact.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "nlohmann/json.hpp"
#include "privhelper/config.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/probe.h"
#include "privhelper/microvm/kvm_probe.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/state_dir.h"
#include "tools/install/agent_state.h"
#include "tools/install/fetch.h"
#include "tools/install/fetcher.h"
#include "tools/install/plan.h"
#include "tools/install/record.h"
#include "tools/install/system.h"

namespace sn::install::internal {

namespace {
constexpr absl::Duration kPrivhelperStart = absl::Seconds(30);
// The oldest qemu the microVM provider is built and tested with (Debian 12's): its microvm
// machine, -sandbox's options and the arguments qemu_command.h writes.
constexpr int kMinQemu[2] = {7, 2};

bool QemuSupported(const std::string& version) {
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return false;
  return major > kMinQemu[0] || (major == kMinQemu[0] && minor >= kMinQemu[1]);
}

}  // namespace

absl::StatusOr<std::string> Run::ProbeProvider() {
  if (opts.provider == "docker") {
    docker::BeastDockerEngine engine(opts.docker_socket);
    privhelper::ProbeResult probe = docker::ProbeDocker(engine);
    if (!probe.ready) {
      say.Say(absl::StrCat("warning: the Docker daemon at ", opts.docker_socket,
                           " is not ready; enrolling anyway"));
    }
    return probe.fingerprint;
  }
  const std::string install_qemu =
      "; install Debian's qemu-system-x86 and qemu-utils (apt-get install qemu-system-x86 "
      "qemu-utils) and run the installer again";
  absl::StatusOr<std::string> version = microvm::QemuVersion(privhelper::kDefaultQemu);
  if (!version.ok()) {
    return Refuse(absl::StrCat("--provider=microvm: ", privhelper::kDefaultQemu, " does not run (",
                               version.status().message(), ")", install_qemu));
  }
  if (!QemuSupported(*version)) {
    return Refuse(absl::StrCat("--provider=microvm: qemu ", *version, " is older than ",
                               kMinQemu[0], ".", kMinQemu[1],
                               ", the oldest the node supports (Debian 12's)"));
  }
  if (access(privhelper::kDefaultQemuImg, X_OK) != 0) {
    return Refuse(absl::StrCat("--provider=microvm: ", privhelper::kDefaultQemuImg,
                               " is missing", install_qemu));
  }
  const microvm::KvmProbe kvm =
      opts.microvm_accel == "tcg"
          ? microvm::KvmProbe{false, "tcg asked for", absl::ZeroDuration()}
          : microvm::ProbeKvm(microvm::kKvmDevice);
  absl::StatusOr<std::string> accel = microvm::ChooseAccel(opts.microvm_accel, kvm);
  if (!accel.ok()) {
    return Refuse(absl::StrCat(
        "--microvm-accel=kvm: KVM does not run guests on this host (", kvm.reason,
        "); give --microvm-accel=auto (KVM where a probe proves it works, else TCG) or tcg"));
  }
  say.Say(absl::StrCat("microVM provider: qemu ", *version, ", accelerator ", *accel,
                       opts.microvm_accel == "auto" && *accel == "tcg"
                           ? absl::StrCat(" (KVM does not run guests here: ", kvm.reason, ")")
                           : std::string()));
  return microvm::MicrovmFingerprint(*version, *accel);
}

absl::Status Run::EnsureVmUser(const SystemUser& agent) {
  if (opts.provider != "microvm") return absl::OkStatus();
  ASSIGN_OR_RETURN(SystemUser user, EnsureSystemUser(opts.vm_user));
  if (user.created) {
    ++changes;
    say.Say(absl::StrCat("created the system user ", opts.vm_user, " (qemu runs as it)"));
  }
  if (user.uid == agent.uid) {
    return Refuse(absl::StrCat("--vm-user ", opts.vm_user, " is the agent's uid ", agent.uid));
  }
  MicrovmInputs m;
  m.accel = opts.microvm_accel;
  m.vm_uid = user.uid;
  m.vm_gid = GroupId("kvm").value_or(user.gid);
  vm = m;
  return absl::OkStatus();
}

// Step 6: the binaries, checksum records, configuration files and units, each configuration
// checked first by its own process's parser.
absl::Status Run::InstallFiles(const SystemUser& user, const std::vector<HostBinary>& binaries,
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
    return absl::InternalError(absl::StrCat("privhelper's configuration: ", c.status().message()));
  }
  return ApplyPlan(in, false);
}

// Step 7a: privhelper's installation identity is the one enrolled.
absl::Status Run::EnsureInstallationId(const std::string& id) {
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
absl::StatusOr<bool> Run::EnsureAgentState(const InstallRecord& rec, const SystemUser& user) {
  ASSIGN_OR_RETURN(AgentState state, EnsureAgentStateAs(L.AgentState(), rec, user));
  if (state == AgentState::kWrotePending) {
    ++changes;
    say.Say(absl::StrCat("wrote the agent's pending enrollment in ", L.AgentState(), "/node (as ",
                         opts.agent_user, ")"));
  }
  return state == AgentState::kEnrolled;
}

// Step 8.
absl::Status Run::FinishEnrollment(const SystemUser& user) {
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

// Steps 7 and 8: the installation identity, then the agent's node identity (finishing the
// enrollment with `agent enroll --resume` when it is not there yet).
absl::Status Run::EnsureIdentities(const InstallRecord& rec, const SystemUser& user) {
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
absl::Status Run::RecordInstalled(const InstallRecord& rec,
                                  const std::vector<HostBinary>& binaries) {
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

absl::Status Run::StartOrPrint() {
  if (systemd) {
    int started = 0;
    for (const char* unit : {kPrivhelperUnitName, kAgentUnitName}) {
      ASSIGN_OR_RETURN(int active, RunCommand({"/bin/systemctl", "is-active", "--quiet", unit}));
      ASSIGN_OR_RETURN(int enabled, RunCommand({"/bin/systemctl", "is-enabled", "--quiet", unit}));
      if (active == 0 && enabled == 0) continue;
      ASSIGN_OR_RETURN(int rc, RunCommand({"/bin/systemctl", "enable", "--now", unit}));
      if (rc != 0) {
        return absl::UnavailableError(
            absl::StrCat("systemctl enable --now ", unit, " exited with ", rc));
      }
      ++started;
    }
    changes += started;
    if (started > 0) say.Say("enabled and started sandbox-node-privhelper and sandbox-node-agent");
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

}  // namespace sn::install::internal

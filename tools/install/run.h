// The installer's run (installer.h lists its steps), internal to sandbox-node-install. The
// steps are split by what they talk to:
//   installer.cc          the run itself: options, records, the plan, the rerun check (1, 6);
//   installer_network.cc  everything read from Core through the network child (2-5);
//   installer_host.cc     what is written and started on this host (6-10).
#ifndef SANDBOX_NODE_TOOLS_INSTALL_RUN_H_
#define SANDBOX_NODE_TOOLS_INSTALL_RUN_H_

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/state/config.h"
#include "common/clock.h"
#include "common/release/artifact.h"
#include "common/wire/http_bodies.h"
#include "tools/install/download_progress.h"
#include "tools/install/fetch.h"
#include "tools/install/fetcher.h"
#include "tools/install/installer.h"
#include "tools/install/layout.h"
#include "tools/install/plan.h"
#include "tools/install/record.h"
#include "tools/install/system.h"

namespace sn::install::internal {

// Prefixed lines on the installer's output, flushed at once.
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
absl::Status RefuseKeepingPending(const Layout& L, std::string_view why);

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
  DownloadProgress downloads{SystemClock::Get()};  // the lines while net downloads
  bool systemd = false;  // systemd is PID 1 and no --root
  std::optional<MicrovmInputs> vm;  // --provider=microvm: set by EnsureVmUser
  int changes = 0;

  Run(const Options& o, std::FILE* out) : opts(o), say(out) {}

  // ---- installer.cc: the run and its records
  absl::Status Prepare();
  // Options that must agree with what an earlier run recorded.
  absl::Status SameOptions(const InstallRecord& r, const std::string& file);
  absl::StatusOr<std::optional<InstallRecord>> ReadRecord(const std::string& path);
  PlanInputs Inputs(const SystemUser& user, std::vector<HostBinary> binaries,
                    std::string host_record, std::string runtime_record);
  absl::Status ApplyPlan(const PlanInputs& in, bool check_only);
  // Step 1 for an installed host.
  absl::Status CheckInstalled(const InstallRecord& rec);
  // A resumed run's pending record, checked: enrolled, and for the same options.
  absl::StatusOr<std::optional<InstallRecord>> ReadPending();
  // The steps of docs/operator-guide.md's installation, in order; every step is a no-op or a
  // refusal on a rerun (CheckInstalled) and resumes from the pending record after a failure.
  absl::Status Main();

  // ---- installer_network.cc: Core, through the network child
  struct PinnedHost {
    std::string source;
    release::VerifiedRelease release;
    std::vector<wire::RuntimeArtifact> artifacts;
  };
  // The agent's user, then the network child running as it (before the first byte from Core).
  absl::StatusOr<SystemUser> StartNetworkChild();
  // Step 2: the console's current release, read once; a resumed run keeps the one it pinned
  // (the same manifest bytes, or a refusal).
  absl::StatusOr<PinnedHost> PinHostRelease(Releases& console,
                                            const std::optional<InstallRecord>& pending);
  // Every host artifact the installation installs (kinds agent, privhelper, native_helper and
  // preparer), each exactly once; the first three are required.
  absl::StatusOr<std::vector<wire::RuntimeArtifact>> HostArtifacts(
      const release::VerifiedRelease& host);
  absl::StatusOr<InstallRecord> EnrollNow(const std::string& host_source,
                                          const release::VerifiedRelease& host,
                                          const std::string& fingerprint);
  // Step 4: the exact Runtime, or a refusal with nothing written.
  absl::Status CheckBundle(BundleReleases& bundle, const wire::SpecificationDocument& doc,
                           const release::VerifiedRelease& runtime, const InstallRecord& rec);
  absl::StatusOr<ChecksumRecord> CheckRuntime(BundleReleases* bundle, const InstallRecord& rec);
  // Step 5: the host program's files, from the bundle when it holds the very same release.
  absl::StatusOr<std::vector<HostBinary>> StageHostFiles(Releases& console,
                                                         std::optional<BundleReleases>& bundle,
                                                         const PinnedHost& host);
  // Step 5.
  absl::StatusOr<std::vector<HostBinary>> StageHost(Releases& from, const std::string& source,
                                                    const std::vector<wire::RuntimeArtifact>& arts,
                                                    bool from_bundle);

  // ---- installer_host.cc: this host's files, identities and services
  // Step 0: the provider's backend fingerprint for the enrollment (spec §3). Docker: its
  // daemon's (a daemon not ready is a warning). microVM: qemu and qemu-img installed, qemu's
  // version supported and the asked accelerator running guests, else a refusal naming what is
  // missing and how to get it.
  absl::StatusOr<std::string> ProbeProvider();
  // --provider=microvm: the VM's system user (created when missing) and group (Debian's `kvm`
  // when there is one, so that qemu may open /dev/kvm; else the user's own), into `vm`.
  absl::Status EnsureVmUser(const SystemUser& agent);
  // Step 6: the binaries, checksum records, configuration files and units, each configuration
  // checked first by its own process's parser.
  absl::Status InstallFiles(const SystemUser& user, const std::vector<HostBinary>& binaries,
                            const PinnedHost& host, const ChecksumRecord& runtime);
  // Step 7a: privhelper's installation identity is the one enrolled.
  absl::Status EnsureInstallationId(const std::string& id);
  // Step 7b (agent_state.h). True when the node identity already exists (and is the enrolled
  // node); otherwise the pending enrollment is in place.
  absl::StatusOr<bool> EnsureAgentState(const InstallRecord& rec, const SystemUser& user);
  // Step 8.
  absl::Status FinishEnrollment(const SystemUser& user);
  // Steps 7 and 8: the installation identity, then the agent's node identity (finishing the
  // enrollment with `agent enroll --resume` when it is not there yet).
  absl::Status EnsureIdentities(const InstallRecord& rec, const SystemUser& user);
  // Step 9: the installed record (no credential) replaces the pending one, durably; the
  // staged downloads go.
  absl::Status RecordInstalled(const InstallRecord& rec, const std::vector<HostBinary>& binaries);
  absl::Status StartOrPrint();
};

}  // namespace sn::install::internal

#endif  // SANDBOX_NODE_TOOLS_INSTALL_RUN_H_

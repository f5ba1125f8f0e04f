// sandbox-node-install: a host from nothing to an enrolled node with one command.
//
// Steps, in order (docs/operator-guide.md "Installing a node" narrates them; docs/formats.md
// gives the records and their fsync order):
//   0. With --provider=microvm: qemu and qemu-img are installed, qemu's version is one the node
//      supports, and the accelerator asked for runs guests (the KVM probe runs a vCPU), or a
//      refusal before anything is fetched or enrolled (installer_host.cc, ProbeProvider).
//   1. Take the installer's lock. A host with install/installed.json is installed: check that
//      every planned file is still exactly as installed and say "nothing changed" (or refuse,
//      naming what differs); nothing is fetched, written or started.
//   2. Create the agent's system user if missing and fork the network child as that user
//      (fetcher.h: no capability, no_new_privs, seccomp); every later exchange with Core
//      goes through it, and root reads only its typed, bounded replies. Pin the host program
//      release: GET /releases/current once (a rerun takes the release its pending file
//      names), its metadata verified with --release-public-key (by the child, then by root).
//   3. Enroll (first, and once: a rerun with install/pending.json resumes without enrolling
//      again). Core's answer is durable in pending.json before anything else is written.
//   4. Read the exact generation's specification from the authenticated configuration route
//      and verify it; verify that the console retains its Runtime release releases/<source>/
//      (metadata, and the specification against its manifest) and, with --bundle, that the
//      bundle holds that same release. A refusal here leaves nothing but pending.json: no node
//      identity, no imported Runtime, no registration, no service.
//   5. Download the host program's executables pinned to the release of step 2, each
//      verified while it streams (from the bundle when it holds that release).
//   6. The network child exits. Apply the plan (plan.h): directories, executables,
//      configuration files, units, the host-program and Runtime checksum records.
//   7. Write privhelper's installation identity (the one enrolled) and the agent's pending
//      enrollment (credential, enrollment.json) as the agent's user.
//   8. Start privhelper (its unit, or by hand where systemd is not PID 1) and run
//      `agent enroll --resume` as the agent's user: it imports the enrolled generation's
//      Runtime through privhelper and writes the node identity.
//   9. Record install/installed.json (no credential) and remove pending.json.
//  10. Enable and start both units, or say systemd is not PID 1 and print the two commands.
// Each step is idempotent: present and equal is "unchanged"; different is refused with the
// path and the difference; an interrupted run is finished by the next.
#ifndef SANDBOX_NODE_TOOLS_INSTALL_INSTALLER_H_
#define SANDBOX_NODE_TOOLS_INSTALL_INSTALLER_H_

#include <cstdio>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "tools/install/layout.h"

namespace sn::install {

inline constexpr char kDefaultDockerSocket[] = "/var/run/docker.sock";

struct Options {
  std::string core_origin;
  std::string token;  // the enrollment token itself (main reads it from --token-file)
  std::string release_public_key;
  std::optional<std::string> ca_bundle;
  bool insecure_allow_http = false;
  bool generation_management = false;
  std::optional<std::string> bundle;
  std::string root;  // "" installs into /
  std::string agent_user = kDefaultAgentUser;
  std::string docker_socket = kDefaultDockerSocket;
  // "docker" or "microvm" (qemu microVMs from a private store: checks qemu and whether KVM runs
  // guests before enrolling, writes privhelper's `microvm` object, makes the store, the VM's
  // user and the privhelper unit's drop-in).
  std::string provider = "docker";
  std::string microvm_accel = "auto";  // "auto", "kvm" or "tcg"
  std::string vm_user = kDefaultVmUser;
};

// Runs the steps above, narrating them on `out`. Errors: InvalidArgument for bad options;
// Unauthenticated for a rejected token or credential; FailedPrecondition (or NotFound,
// DataLoss) for a refusal whose reason the message names exactly (DataLoss too when the
// network child answered out of protocol); Unavailable when Core, dockerd or privhelper could
// not be reached, or the network child died or gave no answer in time (run it again).
absl::Status Install(const Options& options, std::FILE* out);

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_INSTALLER_H_

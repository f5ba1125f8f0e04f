// The installer's plan: every directory and file an installation consists of, with its
// owner, mode and exact contents, computed from the inputs alone (pure, any thread). The
// installer (installer.h) applies the steps in order; each step is idempotent by itself:
// present with the planned bytes, owner and mode is "unchanged", absent is created, anything
// else is a conflict that refuses the installation naming the path and what differs.
//
// The configuration files and units name the paths of the layout (layout.h), so under
// --root the installed tree runs by hand as it is.
#ifndef SANDBOX_NODE_TOOLS_INSTALL_PLAN_H_
#define SANDBOX_NODE_TOOLS_INSTALL_PLAN_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/wire/http_bodies.h"
#include "tools/install/layout.h"

namespace sn::install {

struct HostBinary {
  wire::RuntimeArtifact artifact;  // from the pinned, verified host release
  std::string staged;              // a verified copy in the installer's downloads directory
};

// With --provider=microvm: privhelper's `microvm` object (privhelper/config.h).
struct MicrovmInputs {
  std::string accel;  // as configured: "auto", "kvm" or "tcg"
  uid_t vm_uid = 0;
  gid_t vm_gid = 0;
};

struct PlanInputs {
  Layout layout;
  std::string core_origin;
  bool insecure_allow_http = false;
  bool generation_management = false;
  std::optional<std::string> ca_bundle;  // contents of --ca-bundle, copied for the agent
  std::string release_public_key;
  std::string provider = "docker";       // or "microvm"
  std::string docker_socket;             // docker
  std::optional<MicrovmInputs> microvm;  // set iff provider is "microvm"
  std::string agent_user;
  uid_t agent_uid = 0;
  gid_t agent_gid = 0;
  std::vector<HostBinary> binaries;
  std::string host_record;     // EncodeChecksumRecord(..., false)
  std::string runtime_record;  // EncodeChecksumRecord(..., true)
};

struct Step {
  enum class Kind { kDir, kFile, kBinary };
  Kind kind = Kind::kFile;
  std::string path;
  int mode = 0644;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string contents;            // kFile
  wire::RuntimeArtifact artifact;  // kBinary: the bytes it must hold
  std::string source;              // kBinary: the staged copy to install from
  // kBinary: an earlier step's path whose artifact has the same bytes (the node's one
  // executable under its three names): this name is made a hard link to it, so the programs
  // share one file and its pages (docs/formats.md, "sandbox-node-install").
  std::string link_to;
};

// The installed executable's file name for a host artifact kind ("agent", "privhelper",
// "native_helper", "preparer"); empty for any other kind.
std::string_view InstalledName(std::string_view kind);

// The two configuration files, as the agent and privhelper parse them (agent/state/config.h,
// privhelper/config.h).
std::string RenderAgentConfig(const PlanInputs& in);
std::string RenderPrivhelperConfig(const PlanInputs& in);

// A unit of tools/systemd (or the microVM drop-in) for this layout and user: the executable,
// configuration, socket and VM store paths moved under the root, User=/Group= set to the
// agent's user, and under a root the StateDirectory=/RuntimeDirectory= lines (systemd would
// create them under /) replaced by ReadWritePaths= of the directories the installer made. Comment lines stay as they are.
// With no root and the default user the result is the template itself.
std::string RenderUnit(std::string_view unit_template, const Layout& layout,
                       std::string_view agent_user);

// Every step, in order: directories, executables, configuration, units, records. With the
// microVM provider also the store (root 0755), the executable's fourth name vm_supervisor
// (privhelper starts each VM's supervisor from beside itself) and the unit's drop-in.
std::vector<Step> PlanFiles(const PlanInputs& in);

// The two commands that start both processes by hand (where systemd is not PID 1): exactly
// the units' ExecStart= lines, the agent's run as its user.
std::string PrivhelperCommand(const Layout& layout);
std::string AgentCommand(const Layout& layout, std::string_view agent_user);

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_PLAN_H_

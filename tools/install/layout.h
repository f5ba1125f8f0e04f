// Where sandbox-node-install puts things (docs/operator-guide.md, docs/formats.md).
// Every path is absolute and lies under `root` ("" installs into /): with --root=DIR the
// configuration files and units name these paths inside DIR, so the installed tree runs by
// hand as it is. Pure, any thread.
#ifndef SANDBOX_NODE_TOOLS_INSTALL_LAYOUT_H_
#define SANDBOX_NODE_TOOLS_INSTALL_LAYOUT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sn::install {

struct Layout {
  std::string root;  // "" or an absolute, normalised directory without a trailing "/"

  std::string BinDir() const { return root + "/usr/lib/sandbox-node"; }
  std::string Binary(std::string_view name) const;  // BinDir()/name
  std::string EtcDir() const { return root + "/etc/sandbox-node"; }
  std::string AgentConfig() const { return EtcDir() + "/agent.json"; }
  std::string PrivhelperConfig() const { return EtcDir() + "/privhelper.json"; }
  // A copy of --ca-bundle the agent's user can read.
  std::string CaBundle() const { return EtcDir() + "/ca-bundle.pem"; }
  std::string UnitDir() const { return root + "/etc/systemd/system"; }
  std::string Unit(std::string_view name) const;  // UnitDir()/name
  std::string VarDir() const { return root + "/var/lib/sandbox-node"; }
  std::string AgentState() const { return VarDir() + "/agent"; }
  std::string PrivhelperState() const { return VarDir() + "/privhelper"; }
  // The verified checksums of the Runtime files, beside privhelper's state.
  std::string RuntimeRecord() const { return VarDir() + "/privhelper.runtime.json"; }
  // The host program's release and the checksums of what was installed from it.
  std::string HostRecord() const { return VarDir() + "/host-program.json"; }
  // The installer's own private directory: lock, pending file, downloads.
  std::string InstallDir() const { return VarDir() + "/install"; }
  std::string Lock() const { return InstallDir() + "/lock"; }
  std::string Pending() const { return InstallDir() + "/pending.json"; }
  std::string Installed() const { return InstallDir() + "/installed.json"; }
  std::string Downloads() const { return InstallDir() + "/downloads"; }
  // The microVM provider's private store (privhelper's microvm.store_dir) and the privhelper
  // unit's drop-in that lets it run VMs (tools/systemd/microvm.conf).
  std::string VmStore() const { return VarDir() + "/vm"; }
  std::string PrivhelperDropInDir() const { return UnitDir() + "/sandbox-node-privhelper.service.d"; }
  std::string MicrovmDropIn() const { return PrivhelperDropInDir() + "/microvm.conf"; }
  std::string RunDir() const { return root + "/run/sandbox-node"; }
  std::string Socket() const { return RunDir() + "/privhelper.sock"; }
};

inline constexpr char kAgentUnitName[] = "sandbox-node-agent.service";
inline constexpr char kPrivhelperUnitName[] = "sandbox-node-privhelper.service";
inline constexpr char kDefaultAgentUser[] = "sandbox-node";
// The user qemu runs as with --provider=microvm (never root, never the agent's).
inline constexpr char kDefaultVmUser[] = "sandbox-node-vm";

// The layout for --root=`root` ("" for /). InvalidArgument unless `root` is empty or an
// absolute path without "." or ".." components; trailing slashes are dropped ("/" is "").
// The privhelper socket must fit a unix socket address (107 bytes).
absl::StatusOr<Layout> MakeLayout(std::string_view root);

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_LAYOUT_H_

// The two units of tools/systemd and the microVM drop-in, embedded at build time (the installer is one executable).
#ifndef SANDBOX_NODE_TOOLS_INSTALL_UNITS_H_
#define SANDBOX_NODE_TOOLS_INSTALL_UNITS_H_

#include <string_view>

namespace sn::install {

std::string_view AgentUnitTemplate();
std::string_view PrivhelperUnitTemplate();
// privhelper's drop-in for the microVM provider (tools/systemd/microvm.conf).
std::string_view MicrovmDropInTemplate();

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_UNITS_H_

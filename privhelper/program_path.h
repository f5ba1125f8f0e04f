// Where privhelper finds a program it starts (the native helper, a VM's supervisor): beside its
// own executable in an installation (/usr/lib/sandbox-node/), else at its path in Bazel's
// output tree relative to privhelper's (bazel-bin/privhelper/).
#ifndef SANDBOX_NODE_PRIVHELPER_PROGRAM_PATH_H_
#define SANDBOX_NODE_PRIVHELPER_PROGRAM_PATH_H_

#include <string>
#include <string_view>

namespace sn::privhelper {

// `installed_name` beside this executable when it is there and executable, else
// `build_tree_path` (relative to this executable's directory).
std::string ProgramPath(std::string_view installed_name, std::string_view build_tree_path);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_PROGRAM_PATH_H_

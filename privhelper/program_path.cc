#include "privhelper/program_path.h"

#include <unistd.h>

namespace sn::privhelper {
namespace {

// The path of `name` in the directory of this executable.
std::string BesideExecutable(std::string_view name) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return std::string(name);
  const std::string self(buf, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + std::string(name);
}

}  // namespace

std::string ProgramPath(std::string_view installed_name, std::string_view build_tree_path) {
  const std::string installed = BesideExecutable(installed_name);
  if (access(installed.c_str(), X_OK) == 0) return installed;
  return BesideExecutable(build_tree_path);
}

}  // namespace sn::privhelper

// The node's one executable: agent, privhelper and native helper are installed as three names
// (hard links) of this file, so the three processes share its text pages in the page cache and
// in their Pss (docs/performance.md, "Idle memory"). The name it was started by picks the
// program, exactly; any other name is refused. privhelper starts a native helper with argv[0]
// "native_helper" whatever the file is called (privhelper/helpers/helper_manager.cc).
#include <cstdio>
#include <cstring>

#include "common/entry_points.h"

int main(int argc, char** argv) {
  const char* name = argc > 0 && argv[0] != nullptr ? argv[0] : "";
  if (const char* slash = std::strrchr(name, '/')) name = slash + 1;
  if (std::strcmp(name, "agent") == 0) return sn::agent::Main(argc, argv);
  if (std::strcmp(name, "privhelper") == 0) return sn::privhelper::Main(argc, argv);
  if (std::strcmp(name, "native_helper") == 0) return sn::native::Main(argc, argv);
  std::fprintf(stderr,
               "sandbox-node: started as \"%s\"; run it as agent, privhelper or native_helper "
               "(the names it is installed under)\n",
               name);
  return 2;
}

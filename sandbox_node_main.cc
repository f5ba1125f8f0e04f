// The node's one executable: agent, privhelper and native helper are installed as three names
// (hard links) of this file, so the three processes share its text pages in the page cache and
// in their Pss (docs/performance.md, "Idle memory"). The name it was started by picks the
// program, exactly; any other name is refused. privhelper starts a native helper with argv[0]
// "native_helper" whatever the file is called (privhelper/helpers/helper_manager.cc).
//
// Compiled with SN_TEST_WAITS (only //:sandbox-node-test-waits, a testonly target), it first
// divides the node's long retry waits by SN_TEST_WAIT_DIVISOR; the shipped build refuses to
// start when that variable is set (common/wait_scale.h).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/entry_points.h"
#include "common/wait_scale.h"

int main(int argc, char** argv) {
  if (const char* divisor = std::getenv(sn::kWaitDivisorEnv)) {
#ifdef SN_TEST_WAITS
    auto parsed = sn::ParseWaitDivisor(divisor);
    if (!parsed.ok()) {
      std::fprintf(stderr, "sandbox-node (test waits build): %s\n",
                   std::string(parsed.status().message()).c_str());
      return 2;
    }
    sn::SetWaitDivisor(*parsed);
#else
    (void)divisor;
    std::fprintf(stderr,
                 "sandbox-node: %s is set, but this executable waits exactly as the spec says; "
                 "only the test build shortens waits. Unset it.\n",
                 sn::kWaitDivisorEnv);
    return 2;
#endif
  }
  const char* name = argc > 0 && argv[0] != nullptr ? argv[0] : "";
  if (const char* slash = std::strrchr(name, '/')) name = slash + 1;
  if (std::strcmp(name, "agent") == 0) return sn::agent::Main(argc, argv);
  if (std::strcmp(name, "privhelper") == 0) return sn::privhelper::Main(argc, argv);
  if (std::strcmp(name, "native_helper") == 0) return sn::native::Main(argc, argv);
  if (std::strcmp(name, "vm_supervisor") == 0) return sn::microvm::SupervisorMain(argc, argv);
  std::fprintf(stderr,
               "sandbox-node: started as \"%s\"; run it as agent, privhelper, native_helper or "
               "vm_supervisor (the names it is installed under)\n",
               name);
  return 2;
}

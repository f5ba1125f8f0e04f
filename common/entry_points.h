#pragma once
// The entry points of the node's one executable (//:sandbox-node, sandbox_node_main.cc): it is
// installed under four names, and the name it is started by chooses the program
// (docs/architecture.md, "One executable, four programs"). Each is its old `main`.

namespace sn::agent {
int Main(int argc, char** argv);  // agent/cli/main.cc
}
namespace sn::privhelper {
int Main(int argc, char** argv);  // privhelper/main.cc
}
namespace sn::native {
int Main(int argc, char** argv);  // privhelper/native/native_helper_main.cc
}
namespace sn::microvm {
int SupervisorMain(int argc, char** argv);  // privhelper/native/microvm/supervisor/vm_supervisor.cc
}

// The network child's side of fetcher.h: confinement, then one request at a time until root
// closes the socketpair. Internal to the installer's library.
#ifndef SANDBOX_NODE_TOOLS_INSTALL_FETCH_CHILD_H_
#define SANDBOX_NODE_TOOLS_INSTALL_FETCH_CHILD_H_

#include "tools/install/fetcher.h"

namespace sn::install {

// Runs in the process fork() made; never returns. `channel` is the child's end of the
// socketpair; `parent` root's pid (the child dies with it).
[[noreturn]] void RunFetchChild(int channel, pid_t parent, const FetcherOptions& options);

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_FETCH_CHILD_H_

// privhelper's own capabilities after start-up. Until its socket is bound privhelper may hold
// what its unit grants (CAP_SETGID for the socket's group, CAP_SETPCAP); then it keeps only
// CAP_SETPCAP, which each native helper's child needs before execve to drop its bounding set
// and lock its securebits (privhelper/helpers/spawn.cc). Everything else goes for good: from the
// permitted, effective and inheritable sets, the ambient set and the bounding set.
#ifndef SANDBOX_NODE_PRIVHELPER_CAPABILITIES_H_
#define SANDBOX_NODE_PRIVHELPER_CAPABILITIES_H_

#include <cstdint>

#include "absl/status/status.h"

namespace sn::privhelper {

// The capability set privhelper keeps whatever its provider (a bit mask of CAP_* numbers):
// CAP_SETPCAP, for the native helpers' spawn.
uint64_t KeptCapabilities();

// Drops every capability but KeptCapabilities() and the provider's `extra` (Backend's
// capabilities) from this thread's sets, bounding set included. Capabilities belong to each
// thread, so this must run while privhelper has one thread: FailedPrecondition when
// /proc/self/status counts more (nothing is dropped then).
absl::Status DropCapabilitiesAfterStartup(uint64_t extra = 0);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_CAPABILITIES_H_

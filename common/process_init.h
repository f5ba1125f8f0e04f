// Process-wide set-up that every production binary (agent, privhelper, native_helper, devcore)
// runs first in main().
#ifndef SANDBOX_NODE_COMMON_PROCESS_INIT_H_
#define SANDBOX_NODE_COMMON_PROCESS_INIT_H_

#include <string_view>

namespace sn {

// Structured logging under `component`, and absl::Mutex deadlock detection off. Debian builds
// Abseil without NDEBUG, which leaves the detector on in every binary: a lock-order graph
// update on every Mutex acquisition (gRPC's own locks included), measured at ~1% of the
// agent's CPU per request. Tests do not call this and keep the detector.
void InitProcess(std::string_view component);

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_PROCESS_INIT_H_

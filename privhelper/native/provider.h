// The provider interface of the native helper: what a backend (Docker today, a microVM store
// next) implements so that the shared runtime (native_helper_main.cc: serving threads,
// framing, seccomp filters; dispatch.h: the checks before any native I/O) can run its calls.
// A provider lives in a folder of its own under privhelper/native/ (docker/) and is
// registered once in providers.cc; nothing else names it.
//
// One pure virtual method per operation that runs in privhelper, generated from
// common/operations.def and named by its Enum column, e.g.
//   pb::ExecuteResponse Create(const pb::CreateArgs& args, const Call& call)
//   pb::ExecuteResponse KillCompute(const pb::SandboxArgs& args, const Call& call)
// so a new operation does not compile until every provider implements it. Run() is the one
// dispatch from the request's oneof to those methods (provider.cc), also generated.
//
// Outcome rules every provider keeps: `not_found`/`absent` only from a complete inventory of
// the installation's sandboxes; any failure before a native mutation was sent is `unavailable`;
// a mutation whose outcome is unknown is `uncertain`; typed backend refusals are `failed`.
// An operation the provider declares unsupported (common/provider_operations.def) is answered
// by the runtime before its method is called.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_PROVIDER_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_PROVIDER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/native_helper.pb.h"
#include "proto/privhelper.pb.h"

namespace sn::native {

namespace pb = ::sn::privhelper::v1;

// Per-call control: the deadline (monotonic, from absl::Now on this host) and a cancel flag.
struct CallControl {
  absl::Time deadline = absl::InfiniteFuture();
  const std::atomic<bool>* cancelled = nullptr;
  bool native_started = false;  // set once a mutating backend request may have been sent
  // Asks privhelper for a VM action of this call (proto/native_helper.proto VmRequest; its
  // call_id is set by the runtime) and waits for the answer until `deadline`: privhelper's own
  // status, DeadlineExceeded when none came in time, Unavailable when privhelper hung up.
  // Set by the runtime; privhelper answers only what its permit table allows
  // (privhelper/helpers/vm_permits.h) and kills a helper that asks for more.
  std::function<absl::Status(pb::VmRequest vm)> ask_privhelper;
};

// What privhelper resolved for a call from state it owns, never from the agent (HelperCall).
struct Resolved {
  std::string native_image;  // create: the native image of the request's image name
  int64_t max_active = 0;    // privhelper's configured capacity
  int64_t max_retained = 0;
  // create, a starting resume, kill_compute: the sandboxes of the other calls holding a slot
  // of the same kind in flight when privhelper admitted this one (docs/protocol.md 22a).
  std::vector<std::string> in_flight_sandbox_ids;
};

// One call as the runtime hands it to an operation method (beside the operation's arguments).
struct Call {
  const pb::ExecuteRequest& request;
  const Resolved& resolved;
  CallControl* control;
};

// What the runtime hands a provider's factory (providers.h): the helper's identity and the
// provider's own --<option>=VALUE flags, those its registration names.
struct ProviderContext {
  std::string installation_id;
  int64_t generation = 0;
  std::map<std::string, std::string> options;
};

class Provider {
 public:
  virtual ~Provider() = default;

  // Loads now what the operations would otherwise load from files on first use, so they run
  // under the helper's serving seccomp filter, which forbids opening files (a provider whose
  // operations read files confines them here, landlock.h). Called once by the runtime before it
  // installs that filter and starts its serving threads; an error ends the helper.
  virtual absl::Status PrepareForSandbox() = 0;

  // The operations. Each never throws; every failure is an ExecuteResponse error code.
  // Thread-safe: the runtime runs up to 64 calls at once.
#define SN_OPERATION(e, field, args, result, mutation, slot) \
  virtual pb::ExecuteResponse e(const pb::args##Args& arguments, const Call& call) = 0;
#define SN_AGENT_OPERATION(...)
#include "common/operations.def"

  // Runs the request's operation (its oneof case selects the method). A request without an
  // operation is `invalid` (the runtime's checks never let one through).
  pb::ExecuteResponse Run(const pb::ExecuteRequest& req, const Resolved& resolved,
                          CallControl* ctl);
};

}  // namespace sn::native

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_PROVIDER_H_

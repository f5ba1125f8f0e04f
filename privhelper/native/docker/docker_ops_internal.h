// Shared pieces of the Docker operations (docker_ops.cc, docker_exec.cc, docker_files.cc).
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_DOCKER_OPS_INTERNAL_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_DOCKER_OPS_INTERNAL_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "privhelper/native/docker/docker_ops.h"
#include "privhelper/native/outcomes.h"

namespace sn::native::docker::internal {

// A sandbox's container as a complete, label-filtered list reports it.
struct Lookup {
  bool exists = false;
  std::string id;           // native id (container id)
  bool running = false;     // else retained (created, exited, paused, ...)
  int64_t generation = 0;   // from the generation label
  std::string args_digest;  // from the args label
};

// The installation's containers in one state as a complete list shows them, and the sandboxes
// they carry (their sandbox labels).
struct StateCount {
  int64_t containers = 0;
  std::set<std::string> sandboxes;
};
struct Counts {
  StateCount running;
  StateCount retained;
};

// How many there would be in a state once this call's own sandbox joins it
// (outcomes.h, CountWithInFlight over the containers and the sandboxes they carry).
int64_t CountWithInFlight(const StateCount& counted, const std::vector<std::string>& in_flight,
                          const std::string& own);

::sn::docker::RequestOptions Options(const CallControl& ctl, size_t max_bytes = 8 << 20);
using ::sn::native::Expired;

// sn-<installation>-<sandbox>: the name of every sandbox's container.
std::string ContainerName(const std::string& installation, const std::string& sandbox_id);

// Percent-encodes a query value.

// The sandbox's container: by name when its name and labels prove it; else from the complete,
// label-filtered list, the only proof of absence. Any doubt is an error.
absl::StatusOr<Lookup> FindSandbox(::sn::docker::DockerEngine& e, const std::string& installation,
                                   const std::string& sandbox_id, const CallControl& ctl);
absl::StatusOr<Counts> CountSandboxes(::sn::docker::DockerEngine& e,
                                      const std::string& installation,
                                      const CallControl& ctl);

// What a create needs before it mutates: the sandbox's container and, when it has none, the
// installation's counts. By name first; when nothing has the name, one complete list of the
// installation's containers is both the proof of absence (no entry labelled with the sandbox)
// and the count (FindSandbox's list + CountSandboxes' list in one call). counts is meaningful
// only when the sandbox has no container.
struct Inventory {
  Lookup sandbox;
  Counts counts;
};
absl::StatusOr<Inventory> FindSandboxAndCount(::sn::docker::DockerEngine& e,
                                              const std::string& installation,
                                              const std::string& sandbox_id,
                                              const CallControl& ctl);

using ::sn::native::ErrorResponse;
// A mutation's transport failure: nothing was sent (connect-level) -> unavailable, otherwise
// uncertain.
pb::ErrorCode MutationTransportCode(const absl::Status& s);

// Logs an operation failure detail (never arguments or outputs).
void LogOpFailure(std::string_view op, std::string_view what, std::string_view detail);

// The "Id" of a create answer (container or exec instance): nothing for any other body.
std::optional<std::string> CreatedId(const std::string& body);

}  // namespace sn::native::docker::internal

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_DOCKER_OPS_INTERNAL_H_

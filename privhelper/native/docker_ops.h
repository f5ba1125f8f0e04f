// The Docker provider's operations (spec §5), run inside the native helper. Every container it
// lists or touches carries this installation's labels; containers of other installations on
// the same daemon are invisible: lookups filter by label, and names embed the installation.
//
// Outcome rules: `not_found`/`absent` only from a successful, complete, label-filtered list;
// any failure before a native mutation was sent is `unavailable`; a mutation whose outcome is
// unknown (timeout, reset, daemon 5xx) is `uncertain`; typed daemon refusals are `failed`
// (a confirmed create whose start fails carries create_settled).
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_OPS_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_OPS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "privhelper/docker/engine.h"
#include "privhelper/docker/inventory.h"
#include "proto/privhelper.pb.h"

namespace sn::native {

namespace pb = ::sn::privhelper::v1;

// The labels every container carries and the Engine API version: the inventory's
// (privhelper/docker/inventory.h), one definition for the probe, the inventory and every
// operation.
using docker::kLabelArgs;
using docker::kLabelGeneration;
using docker::kLabelInstallation;
using docker::kLabelSandbox;
inline constexpr const char* kApi = docker::kApiVersionPrefix;

// Per-call control: the deadline (monotonic, from absl::Now on this host) and a cancel flag.
struct CallControl {
  absl::Time deadline = absl::InfiniteFuture();
  const std::atomic<bool>* cancelled = nullptr;
  bool native_started = false;  // set once a mutating Engine request may have been sent
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

class DockerOperations {
 public:
  // REQUIRES: `engine` outlives this; `installation_id` non-empty.
  DockerOperations(docker::DockerEngine* engine, std::string installation_id, int64_t generation)
      : engine_(engine), installation_(std::move(installation_id)), generation_(generation) {}

  // Runs one operation. Never throws; every failure is an ExecuteResponse error code.
  // Thread-safe (calls share only the engine).
  pb::ExecuteResponse Run(const pb::ExecuteRequest& req, const Resolved& resolved,
                          CallControl* ctl);

  // Loads now what the operations would otherwise load from files on first use (OpenSSL's
  // configuration), so they run under the helper's serving seccomp filter, which forbids
  // opening files. Called once by the helper before it installs that filter.
  static void PrepareForSandbox();

  // Container name of a sandbox: unique per installation.
  std::string ContainerName(const std::string& sandbox_id) const;

 private:
  pb::ExecuteResponse Create(const pb::ExecuteRequest& req, const Resolved& resolved,
                             CallControl* ctl);
  pb::ExecuteResponse Resume(const pb::ExecuteRequest& req, const Resolved& resolved,
                             CallControl* ctl);
  pb::ExecuteResponse Kill(const pb::SandboxArgs& a, bool keep_state, CallControl* ctl,
                           const Resolved& resolved);
  pb::ExecuteResponse DeleteRetained(const pb::SandboxArgs& a, CallControl* ctl);
  pb::ExecuteResponse Inspect(const pb::SandboxArgs& a, CallControl* ctl);
  pb::ExecuteResponse Exec(const pb::ExecArgs& a, CallControl* ctl);        // docker_exec.cc
  pb::ExecuteResponse WriteFile(const pb::WriteFileArgs& a, CallControl* ctl);  // docker_files.cc
  pb::ExecuteResponse ReadFile(const pb::ReadFileArgs& a, CallControl* ctl);    // docker_files.cc

  docker::DockerEngine* const engine_;
  const std::string installation_;
  const int64_t generation_;
};

}  // namespace sn::native

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_OPS_H_

// The Docker provider's operations (spec §5), run inside the native helper. Every container it
// lists or touches carries this installation's labels; containers of other installations on
// the same daemon are invisible: lookups filter by label, and names embed the installation.
//
// Outcome rules: `not_found`/`absent` only from a successful, complete, label-filtered list;
// any failure before a native mutation was sent is `unavailable`; a mutation whose outcome is
// unknown (timeout, reset, daemon 5xx) is `uncertain`; typed daemon refusals are `failed`
// (a confirmed create whose start fails carries create_settled).
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_DOCKER_OPS_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_DOCKER_OPS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "privhelper/docker/engine.h"
#include "privhelper/docker/inventory.h"
#include "privhelper/native/provider.h"
#include "proto/privhelper.pb.h"

namespace sn::native::docker {

// The labels every container carries and the Engine API version: the inventory's
// (privhelper/docker/inventory.h), one definition for the probe, the inventory and every
// operation.
using ::sn::docker::kLabelArgs;
using ::sn::docker::kLabelGeneration;
using ::sn::docker::kLabelInstallation;
using ::sn::docker::kLabelSandbox;
inline constexpr const char* kApi = ::sn::docker::kApiVersionPrefix;

// The Docker implementation of the provider interface (privhelper/native/provider.h).
class DockerOperations final : public Provider {
 public:
  // REQUIRES: `engine` outlives this; `installation_id` non-empty.
  DockerOperations(::sn::docker::DockerEngine* engine, std::string installation_id,
                   int64_t generation)
      : engine_(engine), installation_(std::move(installation_id)), generation_(generation) {}
  // The same, owning its engine.
  DockerOperations(std::unique_ptr<::sn::docker::DockerEngine> engine,
                   std::string installation_id, int64_t generation)
      : owned_engine_(std::move(engine)),
        engine_(owned_engine_.get()),
        installation_(std::move(installation_id)),
        generation_(generation) {}

  // OpenSSL's configuration and digest (the args label's SHA-256).
  absl::Status PrepareForSandbox() override;

  // Container name of a sandbox: unique per installation.
  std::string ContainerName(const std::string& sandbox_id) const;

  // The operations (Provider): calls share only the engine.
  pb::ExecuteResponse Create(const pb::CreateArgs& a, const Call& call) override;
  pb::ExecuteResponse Resume(const pb::ResumeArgs& a, const Call& call) override;
  pb::ExecuteResponse Kill(const pb::SandboxArgs& a, const Call& call) override;
  pb::ExecuteResponse KillCompute(const pb::SandboxArgs& a, const Call& call) override;
  pb::ExecuteResponse DeleteRetained(const pb::SandboxArgs& a, const Call& call) override;
  pb::ExecuteResponse Inspect(const pb::SandboxArgs& a, const Call& call) override;
  pb::ExecuteResponse Exec(const pb::ExecArgs& a, const Call& call) override;  // docker_exec.cc
  pb::ExecuteResponse WriteFile(const pb::WriteFileArgs& a,
                                const Call& call) override;  // docker_files.cc
  pb::ExecuteResponse ReadFile(const pb::ReadFileArgs& a,
                               const Call& call) override;  // docker_files.cc

 private:
  // kill and kill_compute: remove the container, or stop it keeping its state.
  pb::ExecuteResponse Stop(const pb::SandboxArgs& a, bool keep_state, CallControl* ctl,
                           const Resolved& resolved);

  const std::unique_ptr<::sn::docker::DockerEngine> owned_engine_;  // may be null
  ::sn::docker::DockerEngine* const engine_;
  const std::string installation_;
  const int64_t generation_;
};

}  // namespace sn::native::docker

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_DOCKER_OPS_H_

// The Docker provider's registration (privhelper/native/providers.cc): its flags and factory.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_REGISTRATION_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_REGISTRATION_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "privhelper/native/provider.h"

namespace sn::native::docker {

// --docker_socket=PATH: the daemon's unix socket (default /var/run/docker.sock).
inline constexpr std::string_view kOptions[] = {"docker_socket"};

// The Docker operations over the Engine API client (Beast, privhelper/docker/beast_engine.h).
absl::StatusOr<std::unique_ptr<Provider>> MakeProvider(const ProviderContext& context);

}  // namespace sn::native::docker

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_REGISTRATION_H_

// The microVM provider's registration (privhelper/native/providers.cc): its flags and factory.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_REGISTRATION_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_REGISTRATION_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "privhelper/native/provider.h"

namespace sn::native::microvm {

// --microvm_store=DIR: privhelper's `microvm.store_dir` (required, absolute).
inline constexpr std::string_view kOptions[] = {"microvm_store"};

// The microVM operations over the installation's VM store (microvm_ops.h).
absl::StatusOr<std::unique_ptr<Provider>> MakeProvider(const ProviderContext& context);

}  // namespace sn::native::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_REGISTRATION_H_

// The providers the native helper can run, one registration each (providers.cc): the name
// privhelper starts a helper with (--provider=NAME, also the provider of
// common/provider_operations.def), the provider's own flags and its factory.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_PROVIDERS_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_PROVIDERS_H_

#include <memory>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "privhelper/native/provider.h"

namespace sn::native {

struct ProviderRegistration {
  std::string_view name;
  std::span<const std::string_view> options;  // the --<option>=VALUE flags it accepts
  absl::StatusOr<std::unique_ptr<Provider>> (*make)(const ProviderContext& context);
};

std::span<const ProviderRegistration> RegisteredProviders();

// The registration of `name`; nullptr when no provider has that name.
const ProviderRegistration* FindProvider(std::string_view name);

// Whether some registered provider accepts the flag --<option>=VALUE.
bool IsProviderOption(std::string_view option);

}  // namespace sn::native

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_PROVIDERS_H_

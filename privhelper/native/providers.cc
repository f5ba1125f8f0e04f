#include "privhelper/native/providers.h"

#include "privhelper/native/docker/registration.h"
#include "privhelper/native/microvm/registration.h"

namespace sn::native {
namespace {

// One line per provider (its folder: privhelper/native/<name>/).
constexpr ProviderRegistration kProviders[] = {
    {"docker", docker::kOptions, &docker::MakeProvider},
    {"microvm", microvm::kOptions, &microvm::MakeProvider},
};

}  // namespace

std::span<const ProviderRegistration> RegisteredProviders() { return kProviders; }

const ProviderRegistration* FindProvider(std::string_view name) {
  for (const ProviderRegistration& p : kProviders) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

bool IsProviderOption(std::string_view option) {
  for (const ProviderRegistration& p : kProviders) {
    for (std::string_view o : p.options) {
      if (o == option) return true;
    }
  }
  return false;
}

}  // namespace sn::native

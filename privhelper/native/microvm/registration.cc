#include "privhelper/native/microvm/registration.h"

#include <string>

#include "privhelper/native/microvm/microvm_ops.h"

namespace sn::native::microvm {

absl::StatusOr<std::unique_ptr<Provider>> MakeProvider(const ProviderContext& context) {
  auto it = context.options.find("microvm_store");
  if (it == context.options.end() || it->second.empty() || it->second[0] != '/') {
    return absl::InvalidArgumentError("--microvm_store=DIR (absolute) is required");
  }
  std::unique_ptr<Provider> provider =
      std::make_unique<MicrovmOperations>(it->second, context.generation);
  return provider;
}

}  // namespace sn::native::microvm

// Provider operation declarations, projected from common/provider_operations.def.
#ifndef SANDBOX_NODE_COMMON_PROVIDER_OPERATIONS_H_
#define SANDBOX_NODE_COMMON_PROVIDER_OPERATIONS_H_

#include <optional>
#include <span>
#include <string_view>

#include "absl/status/status.h"

namespace sn {

struct OperationDeclaration {
  std::string_view provider;
  std::string_view operation;
  bool supported;
  std::string_view reason;  // non-empty iff !supported
};

// Every declaration of the authored source, in source order.
std::span<const OperationDeclaration> AllOperationDeclarations();

// The declaration of `operation` for `provider` in `table`; nullopt when undeclared.
std::optional<OperationDeclaration> FindDeclaration(std::span<const OperationDeclaration> table,
                                                    std::string_view provider,
                                                    std::string_view operation);

// Validates that `table` declares, for `provider`, every operation of spec §5 exactly once,
// each unsupported one with a reason of 1..200 bytes, and nothing else. Node startup and
// generation loading call this before accepting work; FailedPrecondition names the defect.
absl::Status ValidateDeclarations(std::span<const OperationDeclaration> table,
                                  std::string_view provider);

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_PROVIDER_OPERATIONS_H_

// The §5 operation facts, projected from common/operations.def (the only place an operation is
// authored). Header-only and dependency-free, so the codec, the agent, privhelper, the native
// helper and devcore all derive from the same table.
#ifndef SANDBOX_NODE_COMMON_OPERATIONS_H_
#define SANDBOX_NODE_COMMON_OPERATIONS_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace sn {

enum class Operation {
#define SN_OPERATION(e, name, mutation, result, privileged) k##e,
#include "common/operations.def"
#undef SN_OPERATION
};

enum class MutationRule { kNever, kAlways, kUnlessReconciliationOnly };

struct OperationFacts {
  Operation op;
  std::string_view name;
  MutationRule mutation;
  bool has_result;
  bool runs_in_privhelper;
};

inline constexpr OperationFacts kOperationFacts[] = {
#define SN_OPERATION(e, name, mutation, result, privileged) \
  {Operation::k##e, name, MutationRule::mutation, result, privileged},
#include "common/operations.def"
#undef SN_OPERATION
};

inline constexpr size_t kOperationCount = std::size(kOperationFacts);

constexpr const OperationFacts& FactsOf(Operation op) {
  return kOperationFacts[static_cast<size_t>(op)];
}
constexpr std::string_view OperationName(Operation op) { return FactsOf(op).name; }

constexpr std::optional<Operation> ParseOperation(std::string_view name) {
  for (const OperationFacts& f : kOperationFacts) {
    if (f.name == name) return f.op;
  }
  return std::nullopt;
}

// Whether a request of `op` mutates; `reconciliation_only` matters for resume only.
constexpr bool IsMutation(Operation op, bool reconciliation_only = false) {
  switch (FactsOf(op).mutation) {
    case MutationRule::kNever: return false;
    case MutationRule::kAlways: return true;
    case MutationRule::kUnlessReconciliationOnly: return !reconciliation_only;
  }
  return true;
}

constexpr bool HasResult(Operation op) { return FactsOf(op).has_result; }

// The table is in enum order (FactsOf relies on it).
constexpr bool TableInEnumOrder() {
  for (size_t i = 0; i < kOperationCount; ++i) {
    if (static_cast<size_t>(kOperationFacts[i].op) != i) return false;
  }
  return true;
}
static_assert(TableInEnumOrder());

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_OPERATIONS_H_

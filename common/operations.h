// The §5 operation facts, projected from common/operations.def (the only place an operation is
// authored). Header-only and dependency-free, so the codec, the agent, privhelper, the native
// helper and devcore all derive from the same table. Code that dispatches on the operation
// expands the .def itself (a switch with one generated case per line, so -Wswitch and the
// names each case calls make a missing piece a compile error).
#ifndef SANDBOX_NODE_COMMON_OPERATIONS_H_
#define SANDBOX_NODE_COMMON_OPERATIONS_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace sn {

enum class Operation {
#define SN_OPERATION(e, field, args, result, mutation, slot) k##e,
#define SN_AGENT_OPERATION SN_OPERATION
#include "common/operations.def"
};

// A fact that depends on resume's reconciliation_only (false for every other operation).
enum class MutationRule { kNever, kAlways, kUnlessReconciliationOnly };
enum class SlotRule { kNoSlot, kActive, kActiveUnlessReconciliationOnly, kRetained };
// The capacity slot a call holds while it is in flight (privhelper/rpc/slot_reservations.h):
// kActive for a call that starts compute (it also needs a ready generation), kRetained for one
// that moves a sandbox into retention.
enum class Slot { kNone, kActive, kRetained };

struct OperationFacts {
  Operation op;
  std::string_view name;    // the wire name, also the proto oneof member
  std::string_view args;    // the argument shape ("Sandbox": wire::SandboxArgs, proto SandboxArgs)
  std::string_view result;  // the result shape, "None" when a success carries no result
  MutationRule mutation;
  SlotRule slot;
  bool runs_in_privhelper;  // false for the operations the agent answers itself (observe)
};

inline constexpr OperationFacts kOperationFacts[] = {
#define SN_OPERATION(e, field, args, result, mutation, slot)                          \
  {Operation::k##e, #field, #args, #result, MutationRule::mutation, SlotRule::slot, \
   /*runs_in_privhelper=*/true},
#define SN_AGENT_OPERATION(e, field, args, result, mutation, slot)                    \
  {Operation::k##e, #field, #args, #result, MutationRule::mutation, SlotRule::slot, \
   /*runs_in_privhelper=*/false},
#include "common/operations.def"
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

constexpr bool HasResult(Operation op) { return FactsOf(op).result != "None"; }

// The slot a call of `op` holds; `reconciliation_only` matters for resume only.
constexpr Slot SlotOf(Operation op, bool reconciliation_only = false) {
  switch (FactsOf(op).slot) {
    case SlotRule::kNoSlot: return Slot::kNone;
    case SlotRule::kActive: return Slot::kActive;
    case SlotRule::kActiveUnlessReconciliationOnly:
      return reconciliation_only ? Slot::kNone : Slot::kActive;
    case SlotRule::kRetained: return Slot::kRetained;
  }
  return Slot::kNone;
}

// Whether a call of `op` starts compute, so it needs a ready generation.
constexpr bool StartsCompute(Operation op, bool reconciliation_only = false) {
  return SlotOf(op, reconciliation_only) == Slot::kActive;
}

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

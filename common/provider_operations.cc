#include "common/provider_operations.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/operations.h"

namespace sn {
namespace {

constexpr OperationDeclaration kDeclarations[] = {
#define SN_PROVIDER_OPERATION(p, o, s, r) OperationDeclaration{p, o, s, r},
#include "common/provider_operations.def"
#undef SN_PROVIDER_OPERATION
};

}  // namespace

std::span<const OperationDeclaration> AllOperationDeclarations() { return kDeclarations; }

std::optional<OperationDeclaration> FindDeclaration(std::span<const OperationDeclaration> table,
                                                    std::string_view provider,
                                                    std::string_view operation) {
  for (const auto& d : table) {
    if (d.provider == provider && d.operation == operation) return d;
  }
  return std::nullopt;
}

absl::Status ValidateDeclarations(std::span<const OperationDeclaration> table,
                                  std::string_view provider) {
  for (const OperationFacts& facts : kOperationFacts) {
    const std::string_view op = facts.name;
    int count = 0;
    for (const auto& d : table) {
      if (d.provider != provider || d.operation != op) continue;
      ++count;
      if (d.supported != d.reason.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("provider ", AV(provider), " operation ", AV(op),
                         ": a reason is required iff the operation is unsupported"));
      }
      if (d.reason.size() > 200) {
        return absl::FailedPreconditionError(absl::StrCat(
            "provider ", AV(provider), " operation ", AV(op), ": reason longer than 200 bytes"));
      }
    }
    if (count != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("provider ", AV(provider), " declares operation ", AV(op), " ", count,
                       " times (exactly once required)"));
    }
  }
  for (const auto& d : table) {
    if (d.provider != provider) continue;
    if (!ParseOperation(d.operation).has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "provider ", AV(provider), " declares unknown operation ", AV(d.operation)));
    }
  }
  return absl::OkStatus();
}

}  // namespace sn

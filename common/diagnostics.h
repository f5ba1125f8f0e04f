// Node diagnostic codes (spec/wire.md §7), projected from common/diagnostics.def.
#ifndef SANDBOX_NODE_COMMON_DIAGNOSTICS_H_
#define SANDBOX_NODE_COMMON_DIAGNOSTICS_H_

#include <array>
#include <optional>
#include <string_view>

namespace sn {

enum class Diagnostic {
#define SN_DIAGNOSTIC(e, code, cause) e,
#include "common/diagnostics.def"
#undef SN_DIAGNOSTIC
};

struct DiagnosticInfo {
  Diagnostic value;
  std::string_view code;
  std::string_view cause;
};

inline constexpr std::array kDiagnostics = {
#define SN_DIAGNOSTIC(e, code, cause) DiagnosticInfo{Diagnostic::e, code, cause},
#include "common/diagnostics.def"
#undef SN_DIAGNOSTIC
};

std::string_view DiagnosticCode(Diagnostic d);
// Exact lookup: nullopt for a code that is not one of §7.
std::optional<Diagnostic> ParseDiagnostic(std::string_view code);
// Core's normalization: unknown codes become provider_unavailable.
Diagnostic NormalizeDiagnostic(std::string_view code);

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_DIAGNOSTICS_H_

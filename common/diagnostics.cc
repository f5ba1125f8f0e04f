#include "common/diagnostics.h"

namespace sn {

std::string_view DiagnosticCode(Diagnostic d) {
  for (const auto& info : kDiagnostics) {
    if (info.value == d) return info.code;
  }
  return "provider_unavailable";
}

std::optional<Diagnostic> ParseDiagnostic(std::string_view code) {
  for (const auto& info : kDiagnostics) {
    if (info.code == code) return info.value;
  }
  return std::nullopt;
}

Diagnostic NormalizeDiagnostic(std::string_view code) {
  return ParseDiagnostic(code).value_or(Diagnostic::kProviderUnavailable);
}

}  // namespace sn

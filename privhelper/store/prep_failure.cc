#include "privhelper/store/prep_failure.h"

#include "common/error_cause.h"

namespace sn::privhelper::store {

absl::Status PrepFailure(absl::StatusCode code, Diagnostic diagnostic, std::string_view message) {
  return CausedError(code, message, diagnostic);
}

Diagnostic PrepDiagnosticOf(const absl::Status& status) {
  return ReportedDiagnostic(status, "privhelper preparation or collection");
}

}  // namespace sn::privhelper::store

// The one typed cause a failed absl::Status carries across layers (store, importer, helper
// manager, Engine client, release verification, the agent's preparation): the §7 diagnostic it
// reports on the wire (common/diagnostics.def, spec/wire.md §7) and a detail naming the kind of
// failure within the code that made it ("transfer", "socket_missing", "too_many_helpers"; may
// be empty). It is set where the error is made (SetCause) and read, never guessed from text,
// where a status becomes a wire diagnostic or a proto outcome (ReportedDiagnostic).
//
// An error without a cause reaching a conversion is a bug: ReportedDiagnostic logs it as one
// and answers provider_unavailable (the safe answer §7 gives "no more specific code"); a test
// makes it fatal with SetUntypedCauseFatalForTesting. Pure functions, any thread.
#ifndef SANDBOX_NODE_COMMON_ERROR_CAUSE_H_
#define SANDBOX_NODE_COMMON_ERROR_CAUSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/diagnostics.h"

namespace sn {

struct ErrorCause {
  Diagnostic code = Diagnostic::kProviderUnavailable;
  std::string detail;
  bool operator==(const ErrorCause&) const = default;
};

// `status` (not OK) with `code` and `detail` as its cause, replacing any cause it had.
// An OK status is returned unchanged.
absl::Status SetCause(absl::Status status, Diagnostic code, std::string_view detail = {});
// A new status of `code` and `message` with its cause.
absl::Status CausedError(absl::StatusCode code, std::string_view message, Diagnostic diagnostic,
                         std::string_view detail = {});

// The cause of `status`; nullopt for OK and for a status nobody gave one.
std::optional<ErrorCause> CauseOf(const absl::Status& status);

// The diagnostic a failed `status` reports where it becomes a wire diagnostic or a proto
// outcome (`where` names that conversion): its cause's code. Untyped: a bug, logged with
// `where`, counted, and answered provider_unavailable (fatal when set for testing).
Diagnostic ReportedDiagnostic(const absl::Status& status, std::string_view where);

// Untyped errors that reached ReportedDiagnostic in this process.
int64_t UntypedCauseCount();
// Makes an untyped error reaching ReportedDiagnostic abort the process (tests only).
void SetUntypedCauseFatalForTesting(bool fatal);

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_ERROR_CAUSE_H_

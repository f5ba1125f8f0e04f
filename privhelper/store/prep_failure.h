// Typed failures of preparation: every failure a preparation step returns carries the §7
// diagnostic it becomes as its typed cause (common/error_cause.h), so it crosses layers (store,
// importer, server) without anybody parsing text. Release failures (common/release/failure.h:
// provenance, transfer, checksum) carry runtime_download_failed, and only they do.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_PREP_FAILURE_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_PREP_FAILURE_H_

#include <string_view>

#include "absl/status/status.h"
#include "common/diagnostics.h"

namespace sn::privhelper::store {

// A failed step: `code` chosen by what the caller should do, `diagnostic` what it reports.
absl::Status PrepFailure(absl::StatusCode code, Diagnostic diagnostic, std::string_view message);

// The diagnostic a failed step reports: its cause (ReportedDiagnostic: an untyped error is a
// bug, logged, and answered provider_unavailable; never a guess from text).
Diagnostic PrepDiagnosticOf(const absl::Status& status);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_PREP_FAILURE_H_

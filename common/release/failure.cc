#include "common/release/failure.h"

#include <string>
#include <utility>

#include "common/error_cause.h"

namespace sn::release {
namespace {

// The class is the detail of a runtime_download_failed cause (common/error_cause.h).
absl::Status WithClass(absl::Status st, FailureClass c) {
  return SetCause(std::move(st), Diagnostic::kRuntimeDownloadFailed, FailureClassName(c));
}

absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

std::string_view FailureClassName(FailureClass c) {
  switch (c) {
    case FailureClass::kProvenance: return "provenance";
    case FailureClass::kTransfer: return "transfer";
    case FailureClass::kChecksum: return "checksum";
  }
  return "provenance";
}

absl::Status ProvenanceFailure(std::string_view message) {
  return WithClass(absl::FailedPreconditionError(View(message)), FailureClass::kProvenance);
}
absl::Status TransferFailure(std::string_view message) {
  return WithClass(absl::UnavailableError(View(message)), FailureClass::kTransfer);
}
absl::Status ChecksumFailure(std::string_view message) {
  return WithClass(absl::DataLossError(View(message)), FailureClass::kChecksum);
}

std::optional<FailureClass> FailureClassOf(const absl::Status& status) {
  const std::optional<ErrorCause> cause = CauseOf(status);
  if (!cause.has_value() || cause->code != Diagnostic::kRuntimeDownloadFailed) return std::nullopt;
  for (FailureClass c :
       {FailureClass::kProvenance, FailureClass::kTransfer, FailureClass::kChecksum}) {
    if (cause->detail == FailureClassName(c)) return c;
  }
  return std::nullopt;
}

}  // namespace sn::release

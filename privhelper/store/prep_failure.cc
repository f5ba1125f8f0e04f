#include "privhelper/store/prep_failure.h"

#include <optional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/types/optional.h"
#include "common/release/failure.h"

namespace sn::privhelper::store {
namespace {

constexpr char kPayloadUrl[] = "type.sandbox-node/privhelper.PrepDiagnostic";

}  // namespace

absl::Status PrepFailure(absl::StatusCode code, Diagnostic diagnostic, std::string_view message) {
  absl::Status s(code, absl::string_view(message.data(), message.size()));
  const std::string_view c = DiagnosticCode(diagnostic);
  s.SetPayload(kPayloadUrl, absl::Cord(absl::string_view(c.data(), c.size())));
  return s;
}

Diagnostic PrepDiagnosticOf(const absl::Status& status) {
  if (absl::optional<absl::Cord> p = status.GetPayload(kPayloadUrl); p.has_value()) {
    if (std::optional<Diagnostic> d = ParseDiagnostic(std::string(*p)); d.has_value()) return *d;
  }
  if (release::FailureClassOf(status).has_value()) return Diagnostic::kRuntimeDownloadFailed;
  return Diagnostic::kProviderUnavailable;
}

}  // namespace sn::privhelper::store

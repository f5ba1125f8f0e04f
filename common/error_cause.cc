#include "common/error_cause.h"

#include <atomic>
#include <cstdlib>

#include "absl/strings/cord.h"
#include "absl/types/optional.h"
#include "common/absl_view.h"
#include "common/log.h"

namespace sn {
namespace {

// The one payload every typed error carries: "<diagnostic code>" or "<code>/<detail>".
constexpr char kCauseUrl[] = "type.sandbox-node/ErrorCause";

std::atomic<int64_t> untyped_count{0};
std::atomic<bool> untyped_fatal{false};

}  // namespace

absl::Status SetCause(absl::Status status, Diagnostic code, std::string_view detail) {
  if (status.ok()) return status;
  std::string value(DiagnosticCode(code));
  if (!detail.empty()) {
    value += '/';
    value.append(detail.data(), detail.size());
  }
  status.SetPayload(kCauseUrl, absl::Cord(value));
  return status;
}

absl::Status CausedError(absl::StatusCode code, std::string_view message, Diagnostic diagnostic,
                         std::string_view detail) {
  return SetCause(absl::Status(code, AV(message)), diagnostic, detail);
}

std::optional<ErrorCause> CauseOf(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  const absl::optional<absl::Cord> payload = status.GetPayload(kCauseUrl);
  if (!payload.has_value()) return std::nullopt;
  const std::string value(*payload);
  const size_t slash = value.find('/');
  std::optional<Diagnostic> code = ParseDiagnostic(value.substr(0, slash));
  if (!code.has_value()) return std::nullopt;
  ErrorCause c;
  c.code = *code;
  if (slash != std::string::npos) c.detail = value.substr(slash + 1);
  return c;
}

Diagnostic ReportedDiagnostic(const absl::Status& status, std::string_view where) {
  if (std::optional<ErrorCause> c = CauseOf(status); c.has_value()) return c->code;
  untyped_count.fetch_add(1);
  LogError("bug: an error without a typed cause reached a wire conversion; answering "
           "provider_unavailable",
           {{"where", where}, {"error", status.ToString()}});
  if (untyped_fatal.load()) std::abort();
  return Diagnostic::kProviderUnavailable;
}

int64_t UntypedCauseCount() { return untyped_count.load(); }

void SetUntypedCauseFatalForTesting(bool fatal) { untyped_fatal.store(fatal); }

}  // namespace sn

#include "privhelper/docker/engine.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_cause.h"

namespace sn::docker {
namespace {

constexpr TransportFailure kAll[] = {
    TransportFailure::kSocketMissing,     TransportFailure::kConnectionRefused,
    TransportFailure::kPermissionDenied,  TransportFailure::kTimeout,
    TransportFailure::kMalformedResponse, TransportFailure::kResponseTooLarge,
    TransportFailure::kIo,
};

}  // namespace

std::string_view TransportFailureName(TransportFailure f) {
  switch (f) {
    case TransportFailure::kSocketMissing: return "socket_missing";
    case TransportFailure::kConnectionRefused: return "connection_refused";
    case TransportFailure::kPermissionDenied: return "permission_denied";
    case TransportFailure::kTimeout: return "timeout";
    case TransportFailure::kMalformedResponse: return "malformed_response";
    case TransportFailure::kResponseTooLarge: return "response_too_large";
    case TransportFailure::kIo: return "io";
  }
  return "io";
}

absl::Status TransportError(TransportFailure f, std::string_view detail) {
  absl::StatusCode code = absl::StatusCode::kUnavailable;
  if (f == TransportFailure::kPermissionDenied) code = absl::StatusCode::kPermissionDenied;
  if (f == TransportFailure::kTimeout) code = absl::StatusCode::kDeadlineExceeded;
  if (f == TransportFailure::kMalformedResponse || f == TransportFailure::kResponseTooLarge) {
    code = absl::StatusCode::kDataLoss;
  }
  std::string_view name = TransportFailureName(f);
  absl::Status s(code, absl::StrCat("docker ", absl::string_view(name.data(), name.size()),
                                    ": ", absl::string_view(detail.data(), detail.size())));
  // The §7 code a daemon that answers nothing means for the node (the probe reports it); the
  // failure's name is the cause's detail.
  Diagnostic d = Diagnostic::kProviderUnavailable;
  if (f == TransportFailure::kSocketMissing || f == TransportFailure::kConnectionRefused) {
    d = Diagnostic::kDaemonUnreachable;
  } else if (f == TransportFailure::kPermissionDenied) {
    d = Diagnostic::kDaemonPermissionDenied;
  }
  return SetCause(std::move(s), d, name);
}

std::optional<TransportFailure> GetTransportFailure(const absl::Status& s) {
  const std::optional<ErrorCause> cause = CauseOf(s);
  if (!cause.has_value()) return std::nullopt;
  for (TransportFailure f : kAll) {
    if (TransportFailureName(f) == cause->detail) return f;
  }
  return std::nullopt;
}

}  // namespace sn::docker

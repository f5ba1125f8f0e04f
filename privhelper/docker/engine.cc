#include "privhelper/docker/engine.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/types/optional.h"
#include "absl/strings/str_cat.h"

namespace sn::docker {
namespace {

constexpr char kPayloadUrl[] = "type.sandbox-node/docker.TransportFailure";

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
  s.SetPayload(kPayloadUrl, absl::Cord(absl::string_view(name.data(), name.size())));
  return s;
}

std::optional<TransportFailure> GetTransportFailure(const absl::Status& s) {
  if (s.ok()) return std::nullopt;
  absl::optional<absl::Cord> p = s.GetPayload(kPayloadUrl);
  if (!p.has_value()) return std::nullopt;
  std::string v(*p);
  for (TransportFailure f : kAll) {
    if (TransportFailureName(f) == v) return f;
  }
  return std::nullopt;
}

}  // namespace sn::docker

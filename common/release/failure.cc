#include "common/release/failure.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/types/optional.h"

namespace sn::release {
namespace {

constexpr char kPayloadUrl[] = "type.sandbox-node/release.failure";

absl::Status WithClass(absl::Status st, FailureClass c) {
  const std::string_view name = FailureClassName(c);
  st.SetPayload(kPayloadUrl, absl::Cord(absl::string_view(name.data(), name.size())));
  return st;
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
  if (status.ok()) return std::nullopt;
  const absl::optional<absl::Cord> payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  for (FailureClass c :
       {FailureClass::kProvenance, FailureClass::kTransfer, FailureClass::kChecksum}) {
    if (*payload == View(FailureClassName(c))) return c;
  }
  return std::nullopt;
}

}  // namespace sn::release

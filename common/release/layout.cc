#include "common/release/layout.h"

#include "absl/status/status.h"
#include "common/wire/http_bodies.h"

namespace sn::release {

bool IsMetadataName(std::string_view name) {
  return name == kManifestFileName || name == kSignatureFileName || name == kSumsFileName;
}

absl::StatusOr<std::string> ParseCurrentFile(std::string_view contents) {
  if (contents.empty() || contents.back() != '\n') {
    return absl::InvalidArgumentError("the current file must end with one newline");
  }
  const std::string_view name = contents.substr(0, contents.size() - 1);
  if (!wire::IsReleaseSourceName(name)) {
    return absl::InvalidArgumentError("the current file does not hold a release source name");
  }
  return std::string(name);
}

std::string FormatCurrentFile(std::string_view source) {
  std::string out(source);
  out.push_back('\n');
  return out;
}

}  // namespace sn::release

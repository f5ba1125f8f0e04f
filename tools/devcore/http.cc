#include "tools/devcore/http.h"

#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace sn::devcore {

using json = nlohmann::json;

FileBody::~FileBody() { close(fd); }

HttpResponse JsonError(int status, std::string_view message) {
  return HttpResponse{status, "application/json", json{{"error", message}}.dump()};
}

std::optional<std::string> BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  std::string scheme(authorization.substr(0, kScheme.size()));
  absl::AsciiStrToLower(&scheme);
  if (scheme != kScheme) return std::nullopt;
  std::string_view token = authorization.substr(kScheme.size());
  for (char c : token) {
    if (c <= ' ' || c > '~') return std::nullopt;
  }
  if (token.empty() || token.size() > 256) return std::nullopt;
  return std::string(token);
}

std::string_view TargetPath(std::string_view target) {
  return target.substr(0, target.find('?'));
}

std::optional<std::string> QueryParam(std::string_view target, std::string_view key) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::optional<std::string> found;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(target.data() + q + 1, target.size() - q - 1), '&')) {
    const size_t eq = part.find('=');
    const absl::string_view k = part.substr(0, eq);
    if (std::string_view(k.data(), k.size()) != key) continue;
    if (found.has_value() || eq == absl::string_view::npos) return std::nullopt;
    found = std::string(part.substr(eq + 1));
  }
  return found;
}

}  // namespace sn::devcore

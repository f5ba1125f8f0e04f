#include "tools/devcore/admin_bodies.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/json/reader.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"

namespace sn::devcore {
namespace {

absl::Status Bad(std::string_view member, std::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(member), ": ", std::string(rule)));
}

absl::StatusOr<int64_t> ReadPositive(json::Reader& r, std::string_view member) {
  ASSIGN_OR_RETURN(json::ValueType t, r.Peek());
  if (t != json::ValueType::kNumber) return Bad(member, "must be a positive integer");
  ASSIGN_OR_RETURN(std::string_view text, r.Number());
  std::optional<int64_t> v = json::ParseInt64(text);
  if (!v.has_value() || *v <= 0) return Bad(member, "must be a positive integer");
  return *v;
}

// Runs `member(name, reader)` for each member of the body's one object; `member` returns
// false for an unknown name. Duplicates are refused.
template <typename Fn>
absl::Status ForEachMember(std::string_view body, Fn&& member) {
  json::Reader r(body);
  RETURN_IF_ERROR(r.BeginObject());
  std::vector<std::string> seen;
  std::string_view name;
  for (;;) {
    ASSIGN_OR_RETURN(bool more, r.NextMember(&name));
    if (!more) break;
    const std::string n(name);
    for (const std::string& s : seen) {
      if (s == n) return Bad(json::QuoteNameForMessage(n), "duplicate member");
    }
    seen.push_back(n);
    ASSIGN_OR_RETURN(bool known, member(n, r));
    if (!known) return Bad(json::QuoteNameForMessage(n), "unknown member");
  }
  return r.Finish();
}

}  // namespace

absl::StatusOr<DeploymentRecord> DecodeDeploymentBody(std::string_view body) {
  DeploymentRecord d;
  bool has_generation = false, has_serving = false;
  RETURN_IF_ERROR(ForEachMember(body, [&](const std::string& n,
                                          json::Reader& r) -> absl::StatusOr<bool> {
    if (n == "generation") {
      ASSIGN_OR_RETURN(d.generation, ReadPositive(r, n));
      has_generation = true;
      return true;
    }
    if (n == "serving_generation") {
      has_serving = true;
      ASSIGN_OR_RETURN(json::ValueType t, r.Peek());
      if (t == json::ValueType::kNull) {
        RETURN_IF_ERROR(r.Null());
        return true;
      }
      ASSIGN_OR_RETURN(d.serving_generation, ReadPositive(r, n));
      return true;
    }
    return false;
  }));
  if (!has_generation) return Bad("generation", "required");
  if (!has_serving) return Bad("serving_generation", "required (a positive integer or null)");
  return d;
}

absl::StatusOr<GenerationRef> DecodeDropBody(std::string_view body) {
  GenerationRef ref;
  bool has_generation = false, has_digest = false;
  RETURN_IF_ERROR(ForEachMember(body, [&](const std::string& n,
                                          json::Reader& r) -> absl::StatusOr<bool> {
    if (n == "generation") {
      ASSIGN_OR_RETURN(ref.generation, ReadPositive(r, n));
      has_generation = true;
      return true;
    }
    if (n == "specification_digest") {
      ASSIGN_OR_RETURN(json::ValueType t, r.Peek());
      if (t != json::ValueType::kString) return Bad(n, "must be a digest");
      ASSIGN_OR_RETURN(std::string_view s, r.String());
      if (!wire::IsDigest(s)) return Bad(n, "must be 64 lowercase hex characters");
      ref.specification_digest = std::string(s);
      has_digest = true;
      return true;
    }
    return false;
  }));
  if (!has_generation) return Bad("generation", "required");
  if (!has_digest) return Bad("specification_digest", "required");
  return ref;
}

}  // namespace sn::devcore

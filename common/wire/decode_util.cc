#include "common/wire/decode_util.h"

#include "common/json/base64.h"
#include "common/wire/validate.h"

namespace sn::wire::internal {
namespace {

std::string Article(json::ValueType t) {
  const std::string_view n = json::ValueTypeName(t);
  std::string out = (t == json::ValueType::kObject || t == json::ValueType::kArray) ? "an " : "a ";
  out.append(n);
  return out;
}

}  // namespace

std::string Path::Str() const {
  std::string prefix = parent ? parent->Str() : std::string();
  if (index >= 0) return prefix + "[" + std::to_string(index) + "]";
  if (!prefix.empty()) prefix.push_back('.');
  prefix.append(name);
  return prefix;
}

absl::Status Invalid(const Path& p, std::string_view what) {
  std::string msg = p.Str();
  msg.append(": ");
  msg.append(what);
  return absl::InvalidArgumentError(msg);
}

absl::StatusOr<int> MemberTable::Resolve(std::string_view name) {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] != name) continue;
    if ((seen_ >> i) & 1) {
      return absl::InvalidArgumentError("duplicate member " + json::QuoteNameForMessage(name) +
                                        " in " + path_.Str());
    }
    seen_ |= uint64_t{1} << i;
    return static_cast<int>(i);
  }
  return Invalid(path_, "unknown member " + json::QuoteNameForMessage(name));
}

absl::Status MemberTable::RequireAll(uint64_t required) const {
  const uint64_t missing = required & ~seen_;
  if (missing == 0) return absl::OkStatus();
  std::string names;
  int count = 0;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (((missing >> i) & 1) == 0) continue;
    if (count++ > 0) names.append(", ");
    names.push_back('\'');
    names.append(names_[i]);
    names.push_back('\'');
  }
  return Invalid(path_, (count == 1 ? "missing member " : "missing members ") + names);
}

absl::StatusOr<std::vector<RawMember>> ReadTopLevel(std::string_view text, const Path& p) {
  json::Reader r(text);
  ASSIGN_OR_RETURN(json::ValueType t, r.Peek());
  if (t != json::ValueType::kObject) return Invalid(p, "the top-level value is not an object");
  RETURN_IF_ERROR(r.BeginObject());
  std::vector<RawMember> members;
  while (true) {
    std::string_view name;
    ASSIGN_OR_RETURN(bool more, r.NextMember(&name));
    if (!more) break;
    for (const RawMember& m : members) {
      if (m.name == name) {
        return absl::InvalidArgumentError("duplicate member " + json::QuoteNameForMessage(name) +
                                          " in " + p.Str());
      }
    }
    RawMember m;
    m.name = std::string(name);
    ASSIGN_OR_RETURN(m.raw, r.Capture());
    members.push_back(std::move(m));
  }
  RETURN_IF_ERROR(r.Finish());
  return members;
}

absl::Status ExpectType(json::Reader& r, const Path& p, json::ValueType want) {
  ASSIGN_OR_RETURN(json::ValueType t, r.Peek());
  if (t == want) return absl::OkStatus();
  if (t == json::ValueType::kNull) return Invalid(p, "null is not allowed");
  return Invalid(p, "not " + Article(want));
}

absl::StatusOr<std::string_view> ReadString(json::Reader& r, const Path& p) {
  RETURN_IF_ERROR(ExpectType(r, p, json::ValueType::kString));
  return r.String();
}

absl::StatusOr<std::string> ReadBoundedString(json::Reader& r, const Path& p, size_t max_bytes) {
  ASSIGN_OR_RETURN(std::string_view s, ReadString(r, p));
  if (s.size() > max_bytes) return Invalid(p, "longer than " + std::to_string(max_bytes) + " bytes");
  return std::string(s);
}

absl::StatusOr<int64_t> ReadInt64(json::Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(json::ValueType t, r.Peek());
  if (t == json::ValueType::kNull) return Invalid(p, "null is not allowed");
  if (t != json::ValueType::kNumber) return Invalid(p, "not an int64");
  ASSIGN_OR_RETURN(std::string_view text, r.Number());
  std::optional<int64_t> v = json::ParseInt64(text);
  if (!v) return Invalid(p, "not an int64");
  return *v;
}

absl::StatusOr<int64_t> ReadInt64InRange(json::Reader& r, const Path& p, int64_t lo, int64_t hi) {
  ASSIGN_OR_RETURN(int64_t v, ReadInt64(r, p));
  if (v < lo || v > hi) {
    return Invalid(p, "out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

absl::StatusOr<int64_t> ReadPositive(json::Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(json::ValueType t, r.Peek());
  if (t == json::ValueType::kNull) return Invalid(p, "null is not allowed");
  if (t != json::ValueType::kNumber) return Invalid(p, "not a positive int64");
  ASSIGN_OR_RETURN(std::string_view text, r.Number());
  std::optional<int64_t> v = json::ParseInt64(text);
  if (!v || *v <= 0) return Invalid(p, "not a positive int64");
  return *v;
}

absl::StatusOr<bool> ReadBool(json::Reader& r, const Path& p) {
  RETURN_IF_ERROR(ExpectType(r, p, json::ValueType::kBool));
  return r.Bool();
}

absl::Status ReadTrue(json::Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(bool v, ReadBool(r, p));
  if (!v) return Invalid(p, "must be true when present (omit it instead of false)");
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadUuid(json::Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(std::string_view s, ReadString(r, p));
  if (!IsUuid(s)) return Invalid(p, "not a canonical lowercase uuid");
  return std::string(s);
}

absl::StatusOr<std::string> ReadDigest(json::Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(std::string_view s, ReadString(r, p));
  if (!IsDigest(s)) return Invalid(p, "not a digest (64 lowercase hex characters)");
  return std::string(s);
}

absl::StatusOr<std::string> ReadCode(json::Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(std::string_view s, ReadString(r, p));
  if (!IsCode(s)) return Invalid(p, "not a code ([a-z][a-z0-9_]{0,63})");
  return std::string(s);
}

absl::StatusOr<std::string> ReadTimestamp(json::Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(std::string_view s, ReadString(r, p));
  if (!IsTimestamp(s)) return Invalid(p, "not an RFC 3339 UTC timestamp");
  return std::string(s);
}

absl::StatusOr<int> ReadEnum(json::Reader& r, const Path& p,
                             absl::Span<const std::string_view> values) {
  ASSIGN_OR_RETURN(std::string_view s, ReadString(r, p));
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] == s) return static_cast<int>(i);
  }
  std::string allowed;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) allowed.append(" | ");
    allowed.push_back('"');
    allowed.append(values[i]);
    allowed.push_back('"');
  }
  return Invalid(p, "not one of " + allowed);
}

absl::Status ReadBase64(json::Reader& r, const Path& p, size_t max_decoded, std::string* out) {
  ASSIGN_OR_RETURN(std::string_view s, ReadString(r, p));
  absl::Status st = json::Base64Decode(s, max_decoded, out);
  if (!st.ok()) return Invalid(p, std::string(st.message()));
  return absl::OkStatus();
}

absl::Status ReadVersionOne(json::Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(json::ValueType t, r.Peek());
  if (t == json::ValueType::kNumber) {
    ASSIGN_OR_RETURN(std::string_view text, r.Number());
    if (text == "1") return absl::OkStatus();
  }
  return Invalid(p, "must be the integer 1");
}

}  // namespace sn::wire::internal

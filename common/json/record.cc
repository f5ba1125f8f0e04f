#include "common/json/record.h"

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"

namespace sn::json {
namespace {

// Records are a few levels deep (an object in an array in the record).
constexpr int kMaxRecordDepth = 8;

// Reads one value with `r`. Any reader error is a syntax error (torn); a duplicate member is
// noted in `*duplicate` (the first one) and the parse goes on, so a record both cut short and
// duplicated is torn.
absl::Status ReadValue(Reader& r, RecordValue* out, std::string* duplicate) {
  absl::StatusOr<ValueType> type = r.Peek();
  if (!type.ok()) return type.status();
  out->type = *type;
  switch (*type) {
    case ValueType::kString: {
      absl::StatusOr<std::string_view> s = r.String();
      if (!s.ok()) return s.status();
      out->text = std::string(*s);
      return absl::OkStatus();
    }
    case ValueType::kNumber: {
      absl::StatusOr<std::string_view> n = r.Number();
      if (!n.ok()) return n.status();
      out->text = std::string(*n);
      return absl::OkStatus();
    }
    case ValueType::kBool: {
      absl::StatusOr<bool> b = r.Bool();
      if (!b.ok()) return b.status();
      out->text = *b ? "true" : "false";
      return absl::OkStatus();
    }
    case ValueType::kNull:
      return r.Null();
    case ValueType::kArray: {
      if (absl::Status s = r.BeginArray(); !s.ok()) return s;
      for (;;) {
        absl::StatusOr<bool> more = r.NextElement();
        if (!more.ok()) return more.status();
        if (!*more) return absl::OkStatus();
        out->elements.emplace_back();
        if (absl::Status s = ReadValue(r, &out->elements.back(), duplicate); !s.ok()) return s;
      }
    }
    case ValueType::kObject: {
      if (absl::Status s = r.BeginObject(); !s.ok()) return s;
      for (;;) {
        std::string_view name;
        absl::StatusOr<bool> more = r.NextMember(&name);
        if (!more.ok()) return more.status();
        if (!*more) return absl::OkStatus();
        std::string n(name);
        if (duplicate->empty()) {
          for (const auto& member : out->members) {
            if (member.name == n) {
              *duplicate = QuoteNameForMessage(n);
              break;
            }
          }
        }
        out->members.push_back(RecordMember{std::move(n), RecordValue()});
        if (absl::Status s = ReadValue(r, &out->members.back().value, duplicate); !s.ok()) {
          return s;
        }
      }
    }
  }
  return absl::OkStatus();
}

const char* TypeWord(ValueType t) {
  switch (t) {
    case ValueType::kObject: return "an object";
    case ValueType::kArray: return "an array";
    case ValueType::kString: return "a string";
    case ValueType::kNumber: return "an integer";
    case ValueType::kBool: return "a boolean";
    case ValueType::kNull: return "null";
  }
  return "a value";
}

}  // namespace

bool IsTornRecord(const absl::Status& s) { return absl::IsDataLoss(s); }
bool IsMalformedRecord(const absl::Status& s) { return absl::IsInvalidArgument(s); }

absl::Status Recoded(const absl::Status& s, absl::StatusCode code) {
  if (s.ok()) return s;
  return absl::Status(code, s.message());
}

std::optional<uint64_t> ParseUint64(std::string_view t) {
  if (t.empty() || t.size() > 20 || (t.size() > 1 && t[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

absl::StatusOr<RecordObject> RecordObject::Parse(std::string_view text, std::string_view what,
                                                 size_t max_bytes) {
  const std::string record(what);
  auto torn = [&](absl::string_view detail) {
    return absl::DataLossError(absl::StrCat(record, ": torn or foreign record: ", detail));
  };
  if (text.size() > max_bytes) {
    return torn(absl::StrCat("larger than ", max_bytes, " bytes"));
  }
  Reader r(text, 0, kMaxRecordDepth);
  absl::StatusOr<ValueType> type = r.Peek();
  if (!type.ok()) return torn(type.status().message());
  if (*type != ValueType::kObject) return torn("not a JSON object");
  RecordValue value;
  std::string duplicate;
  if (absl::Status s = ReadValue(r, &value, &duplicate); !s.ok()) return torn(s.message());
  if (absl::Status s = r.Finish(); !s.ok()) return torn(s.message());
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(record, ": malformed record: duplicate member ", duplicate));
  }
  return RecordObject(record, "", std::move(value));
}

absl::Status RecordObject::Malformed(std::string_view detail) const {
  return absl::InvalidArgumentError(
      absl::StrCat(record_, ": malformed record: ", path_, AV(detail)));
}

absl::Status RecordObject::MemberMalformed(std::string_view member,
                                           std::string_view detail) const {
  return Malformed(absl::StrCat("member ", QuoteNameForMessage(member), " ", AV(detail)));
}

absl::Status RecordObject::Torn(std::string_view detail) const {
  return absl::DataLossError(
      absl::StrCat(record_, ": torn or foreign record: ", path_, AV(detail)));
}

std::string RecordObject::Nested(std::string_view member, std::optional<size_t> index) const {
  std::string where = path_.empty() ? "in " : path_.substr(0, path_.size() - 2);
  absl::StrAppend(&where, path_.empty() ? "" : ".", QuoteNameForMessage(member));
  if (index.has_value()) absl::StrAppend(&where, "[", *index, "]");
  return where + ": ";
}

int RecordObject::Find(std::string_view name) const {
  for (size_t i = 0; i < value_.members.size(); ++i) {
    if (!taken_[i] && value_.members[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool RecordObject::Has(std::string_view name) const { return Find(name) >= 0; }

std::optional<ValueType> RecordObject::TypeOf(std::string_view name) const {
  const int i = Find(name);
  if (i < 0) return std::nullopt;
  return value_.members[static_cast<size_t>(i)].value.type;
}

std::vector<std::string> RecordObject::Names() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < value_.members.size(); ++i) {
    if (!taken_[i]) out.push_back(value_.members[i].name);
  }
  return out;
}

absl::StatusOr<RecordValue*> RecordObject::Take(std::string_view name, ValueType type,
                                                bool null_ok, bool absent_ok) {
  const int i = Find(name);
  if (i < 0) {
    if (absent_ok) return nullptr;
    return MemberMalformed(name, "is missing");
  }
  RecordValue& v = value_.members[static_cast<size_t>(i)].value;
  if (v.type == ValueType::kNull && null_ok) {
    taken_[static_cast<size_t>(i)] = true;
    return nullptr;
  }
  if (v.type != type) {
    return MemberMalformed(name, absl::StrCat("must be ", TypeWord(type),
                                              null_ok ? " or null" : ""));
  }
  taken_[static_cast<size_t>(i)] = true;
  return &v;
}

absl::Status RecordObject::Schema(int64_t want, std::string_view name) {
  const int i = Find(name);
  if (i < 0) return Torn(absl::StrCat("no ", QuoteNameForMessage(name), " member"));
  const RecordValue& v = value_.members[static_cast<size_t>(i)].value;
  std::optional<int64_t> got =
      v.type == ValueType::kNumber ? ParseInt64(v.text) : std::optional<int64_t>();
  if (!got.has_value() || *got != want) {
    return Torn(absl::StrCat("member ", QuoteNameForMessage(name), " is not ", want));
  }
  taken_[static_cast<size_t>(i)] = true;
  return absl::OkStatus();
}

absl::StatusOr<std::string> RecordObject::String(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kString, false, false);
  if (!v.ok()) return v.status();
  return std::move((*v)->text);
}

absl::StatusOr<std::optional<std::string>> RecordObject::NullableString(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kString, true, false);
  if (!v.ok()) return v.status();
  if (*v == nullptr) return std::optional<std::string>();
  return std::optional<std::string>(std::move((*v)->text));
}

absl::StatusOr<std::optional<std::string>> RecordObject::OptionalString(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kString, false, true);
  if (!v.ok()) return v.status();
  if (*v == nullptr) return std::optional<std::string>();
  return std::optional<std::string>(std::move((*v)->text));
}

absl::StatusOr<int64_t> RecordObject::Int(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kNumber, false, false);
  if (!v.ok()) return v.status();
  std::optional<int64_t> i = ParseInt64((*v)->text);
  if (!i.has_value()) return MemberMalformed(name, "must be an integer");
  return *i;
}

absl::StatusOr<std::optional<int64_t>> RecordObject::OptionalInt(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kNumber, false, true);
  if (!v.ok()) return v.status();
  if (*v == nullptr) return std::optional<int64_t>();
  std::optional<int64_t> i = ParseInt64((*v)->text);
  if (!i.has_value()) return MemberMalformed(name, "must be an integer");
  return i;
}

absl::StatusOr<uint64_t> RecordObject::Uint(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kNumber, false, false);
  if (!v.ok()) return v.status();
  std::optional<uint64_t> u = ParseUint64((*v)->text);
  if (!u.has_value()) return MemberMalformed(name, "must be a non-negative integer");
  return *u;
}

absl::StatusOr<bool> RecordObject::Bool(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kBool, false, false);
  if (!v.ok()) return v.status();
  return (*v)->text == "true";
}

absl::StatusOr<std::optional<bool>> RecordObject::NullableBool(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kBool, true, false);
  if (!v.ok()) return v.status();
  if (*v == nullptr) return std::optional<bool>();
  return std::optional<bool>((*v)->text == "true");
}

absl::StatusOr<RecordObject> RecordObject::Object(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kObject, false, false);
  if (!v.ok()) return v.status();
  return RecordObject(record_, Nested(name, std::nullopt), std::move(**v));
}

absl::StatusOr<std::optional<RecordObject>> RecordObject::NullableObject(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kObject, true, false);
  if (!v.ok()) return v.status();
  if (*v == nullptr) return std::optional<RecordObject>();
  return std::optional<RecordObject>(
      RecordObject(record_, Nested(name, std::nullopt), std::move(**v)));
}

absl::StatusOr<std::vector<RecordObject>> RecordObject::Objects(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kArray, false, false);
  if (!v.ok()) return v.status();
  std::vector<RecordObject> out;
  for (size_t i = 0; i < (*v)->elements.size(); ++i) {
    RecordValue& e = (*v)->elements[i];
    if (e.type != ValueType::kObject) {
      return Malformed(absl::StrCat("member ", QuoteNameForMessage(name), "[", i,
                                    "] must be an object"));
    }
    out.push_back(RecordObject(record_, Nested(name, i), std::move(e)));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> RecordObject::Strings(std::string_view name) {
  absl::StatusOr<RecordValue*> v = Take(name, ValueType::kArray, false, false);
  if (!v.ok()) return v.status();
  std::vector<std::string> out;
  for (size_t i = 0; i < (*v)->elements.size(); ++i) {
    RecordValue& e = (*v)->elements[i];
    if (e.type != ValueType::kString) {
      return Malformed(absl::StrCat("member ", QuoteNameForMessage(name), "[", i,
                                    "] must be a string"));
    }
    out.push_back(std::move(e.text));
  }
  return out;
}

absl::Status RecordObject::Finish() const {
  for (size_t i = 0; i < value_.members.size(); ++i) {
    if (!taken_[i]) return MemberMalformed(value_.members[i].name, "is unknown");
  }
  return absl::OkStatus();
}

}  // namespace sn::json

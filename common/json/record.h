// The one strict reader of durable records and trusted configuration files: every JSON record
// the node writes to disk (privhelper's store, the agent's state files, the operation record)
// and privhelper's configuration are read through it, with the wire codec's rules (reader.h,
// spec/wire.md §2): RFC 8259 with valid UTF-8, integers exactly (no fraction, exponent or
// -0), no member named twice in any object, no member the record does not define, every
// member of the declared type, and a bounded size.
//
// Two kinds of refusal, told apart by code:
//   - torn or foreign (DataLoss): the bytes are not one complete JSON object within the bound
//     (empty, cut short, trailing bytes, not JSON, not an object, nested too deep), or the
//     object's schema member is missing or names another schema. Written by nothing of ours,
//     or by another format version.
//   - malformed (InvalidArgument): a complete object of our schema that breaks the record's
//     rules: a duplicate member, an unknown member, a missing member, a member of the wrong
//     type, a value the record does not allow.
// Both messages start "<what>: torn or foreign record: " or "<what>: malformed record: " and
// name the member (quoted as reader.h's QuoteNameForMessage does), never its value. A record's
// own decoder may re-code the status for its callers (privhelper's store answers
// FailedPrecondition, the agent DataLoss) and keeps the message.
//
// Usage: Parse, take every member the record defines (each accessor takes it: a member taken
// once is gone), then Finish, which refuses any member left (an unknown member).
#ifndef SANDBOX_NODE_COMMON_JSON_RECORD_H_
#define SANDBOX_NODE_COMMON_JSON_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/json/reader.h"

namespace sn::json {

// The default bound of a record's text.
inline constexpr size_t kMaxRecordBytes = 1 << 20;

bool IsTornRecord(const absl::Status& s);      // DataLoss
bool IsMalformedRecord(const absl::Status& s);  // InvalidArgument

// `s` with `code` and its message unchanged (a decoder's own code for either kind).
absl::Status Recoded(const absl::Status& s, absl::StatusCode code);

// One parsed JSON value of a record (the reader keeps nothing of the input).
// (A named member type, not std::pair: a pair of an incomplete type does not compile with
// clang and libstdc++ 12.)
struct RecordMember;
struct RecordValue {
  ValueType type = ValueType::kNull;
  std::string text;  // string: unescaped; number: raw text; bool: "true"/"false"
  std::vector<RecordMember> members;  // object, in document order
  std::vector<RecordValue> elements;  // array
};
struct RecordMember {
  std::string name;
  RecordValue value;
};

class RecordObject {
 public:
  // Parses `text` as one JSON object of at most `max_bytes`. `what` names the record in
  // messages ("preparation plan", "node/identity.json").
  static absl::StatusOr<RecordObject> Parse(std::string_view text, std::string_view what,
                                            size_t max_bytes = kMaxRecordBytes);

  RecordObject(RecordObject&&) = default;
  RecordObject& operator=(RecordObject&&) = default;

  // Refuses as torn or foreign unless the member `name` is the integer `want`; takes it.
  absl::Status Schema(int64_t want, std::string_view name = "schema");

  // Whether the member is present and not taken yet; its type.
  bool Has(std::string_view name) const;
  std::optional<ValueType> TypeOf(std::string_view name) const;
  // The names present and not taken yet, in document order.
  std::vector<std::string> Names() const;

  // Typed members. Missing or of another type: malformed (naming the member). The Nullable
  // forms also accept null (nullopt); the Optional forms also accept absence (nullopt).
  absl::StatusOr<std::string> String(std::string_view name);
  absl::StatusOr<std::optional<std::string>> NullableString(std::string_view name);
  absl::StatusOr<std::optional<std::string>> OptionalString(std::string_view name);
  absl::StatusOr<int64_t> Int(std::string_view name);
  absl::StatusOr<std::optional<int64_t>> OptionalInt(std::string_view name);
  absl::StatusOr<uint64_t> Uint(std::string_view name);
  absl::StatusOr<bool> Bool(std::string_view name);
  absl::StatusOr<std::optional<bool>> NullableBool(std::string_view name);
  absl::StatusOr<RecordObject> Object(std::string_view name);
  absl::StatusOr<std::optional<RecordObject>> NullableObject(std::string_view name);
  // An array whose every element is an object.
  absl::StatusOr<std::vector<RecordObject>> Objects(std::string_view name);
  // An array whose every element is a string.
  absl::StatusOr<std::vector<std::string>> Strings(std::string_view name);

  // OK when every member was taken; else malformed, naming the first one left.
  absl::Status Finish() const;

  // Errors of this record (for rules its decoder checks itself), naming `member` when given.
  absl::Status Malformed(std::string_view detail) const;
  absl::Status MemberMalformed(std::string_view member, std::string_view detail) const;
  absl::Status Torn(std::string_view detail) const;

  // The record's name, as given to Parse.
  const std::string& what() const { return record_; }

 private:
  RecordObject(std::string record, std::string path, RecordValue value)
      : record_(std::move(record)),
        path_(std::move(path)),
        value_(std::move(value)),
        taken_(value_.members.size(), false) {}

  // The index of the untaken member `name`, or -1.
  int Find(std::string_view name) const;
  // Takes `name` when it has `type` (nullptr when absent), else a malformed error.
  absl::StatusOr<RecordValue*> Take(std::string_view name, ValueType type, bool null_ok,
                                    bool absent_ok);
  // The path prefix of a nested object: "in 'artifacts'[2]: ".
  std::string Nested(std::string_view member, std::optional<size_t> index) const;

  std::string record_;
  std::string path_;  // "" for the record itself, else where this object sits in it
  RecordValue value_;
  std::vector<bool> taken_;
};

// Exact uint64 from a JSON number's raw text (digits only, no leading zero); nullopt else.
std::optional<uint64_t> ParseUint64(std::string_view number_text);

}  // namespace sn::json

#endif  // SANDBOX_NODE_COMMON_JSON_RECORD_H_

// A strict pull (streaming) JSON reader over an in-memory text (RFC 8259 plus the stricter
// rules of spec/wire.md §2).
//
// Why our own reader instead of nlohmann::json's SAX interface:
//   - nlohmann's SAX reports integers as already-converted values, never as raw text, so `-0`
//     and `1.0`-style spellings cannot be told apart from `0` and `1`; the wire contract
//     rejects them.
//   - nlohmann copies every string into its token buffer. A write_file request carries up to
//     64 MiB of base64 in one string; copying it would break the 2.5x peak-RSS target of the
//     decoder. This reader returns escape-free strings as views into the input (zero copy).
//   - A DOM cannot see duplicate members at all, and nlohmann is slower than a reader that
//     validates UTF-8 with an ASCII fast path.
//
// Contract: the reader never throws and never reads outside the input. Every error is an
// absl::InvalidArgument whose message names the byte offset and the JSON rule broken, never
// the offending text. Strings are checked for valid UTF-8 (no overlong forms, no surrogate
// code points, nothing above U+10FFFF), `\u0000` and unpaired surrogate escapes are rejected.
// Numbers are validated against the JSON grammar and returned as raw text; ParseInt64 turns
// them into int64 exactly. Nesting depth counts every object and array; the top-level value
// of a fresh reader is depth base_depth + 1.
#ifndef SANDBOX_NODE_COMMON_JSON_READER_H_
#define SANDBOX_NODE_COMMON_JSON_READER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sn::json {

enum class ValueType { kObject, kArray, kString, kNumber, kBool, kNull };

// "object", "array", ...
std::string_view ValueTypeName(ValueType t);

class Reader {
 public:
  // `base_depth` is the depth of the container that holds the text (0 for a whole document);
  // a value nested deeper than `max_depth` is an error.
  explicit Reader(std::string_view input, int base_depth = 0, int max_depth = 8);

  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // The type of the next value (after whitespace), without consuming it.
  absl::StatusOr<ValueType> Peek();

  // Consumes '{'. Then call NextMember until it returns false.
  absl::Status BeginObject();
  // Returns true and the (unescaped) member name when another member follows, with the
  // reader positioned at its value (which the caller must consume); false after consuming '}'.
  // The name stays valid until the next NextMember call.
  absl::StatusOr<bool> NextMember(std::string_view* name);

  // Consumes '['. Then call NextElement until it returns false.
  absl::Status BeginArray();
  // True when another element follows (the caller consumes it); false after consuming ']'.
  absl::StatusOr<bool> NextElement();

  // A string value, unescaped. Points into the input when the string has no escapes,
  // otherwise into a scratch buffer valid until the next String() call.
  absl::StatusOr<std::string_view> String();
  // A number value's raw text, validated against the JSON grammar.
  absl::StatusOr<std::string_view> Number();
  absl::StatusOr<bool> Bool();
  absl::Status Null();

  // Consumes one value of any type, validating it completely, including that no object in
  // it has two members with the same (unescaped) name.
  absl::Status Skip();
  // Like Skip, and returns the exact text of the value.
  absl::StatusOr<std::string_view> Capture();

  // REQUIRES: the top-level value was consumed. Only whitespace may remain.
  absl::Status Finish();

  size_t offset() const { return pos_; }
  // The number of containers open around the reader's position (base_depth included).
  int depth() const { return depth_; }

 private:
  absl::Status Error(std::string_view what) const;
  absl::Status Error(size_t at, std::string_view what) const;
  void SkipWhitespace();
  absl::Status Expect(char c);
  absl::Status Enter();
  absl::StatusOr<std::string_view> ReadString(std::string* scratch);
  absl::Status ReadEscape(std::string* out);
  absl::Status SkipWithDuplicateCheck();

  std::string_view in_;
  size_t pos_ = 0;
  int depth_;
  int max_depth_;
  bool first_ = false;  // no element/member read yet in the innermost open container
  std::string name_scratch_;
  std::string value_scratch_;
};

// Exact int64 from a JSON number's raw text: rejects fractions, exponents, `-0`, leading
// zeros and values outside [-2^63, 2^63-1]. nullopt on any of those.
std::optional<int64_t> ParseInt64(std::string_view number_text);

// `'name'` when `name` is short printable ASCII, else a neutral placeholder: error messages
// name members but never echo arbitrary input.
std::string QuoteNameForMessage(std::string_view name);

// True when `s` is valid UTF-8 with no surrogate code points and nothing above U+10FFFF.
bool IsValidUtf8(std::string_view s);

}  // namespace sn::json

#endif  // SANDBOX_NODE_COMMON_JSON_READER_H_

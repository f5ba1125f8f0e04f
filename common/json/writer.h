// A compact JSON writer for the wire encoder: objects, arrays, strings (escaped so that the
// output is valid for any valid-UTF-8 input), int64, booleans, null and base64 strings.
//
// Contract: the caller emits a well-formed sequence (Key before every member value, balanced
// Begin/End); the writer inserts commas. REQUIRES: string inputs are valid UTF-8 without
// U+0000 (the decoder guarantees it for values it produced).
#ifndef SANDBOX_NODE_COMMON_JSON_WRITER_H_
#define SANDBOX_NODE_COMMON_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sn::json {

class Writer {
 public:
  Writer() = default;
  // Reserves capacity for the output (e.g. a frame with a large base64 payload).
  void Reserve(size_t n) { out_.reserve(n); }

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view name);
  void String(std::string_view s);
  void Int(int64_t v);
  void Bool(bool v);
  void Null();
  // Writes `bytes` as a base64 (RFC 4648 §4) JSON string without an intermediate copy.
  void Base64String(std::string_view bytes);
  // Writes already valid JSON text (e.g. a captured value) as the next value.
  void Raw(std::string_view json);

  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void BeforeValue();

  std::string out_;
  std::vector<bool> need_comma_;  // per open container
  bool after_key_ = false;
};

// Appends `s` as a quoted, escaped JSON string.
void AppendQuoted(std::string_view s, std::string* out);

}  // namespace sn::json

#endif  // SANDBOX_NODE_COMMON_JSON_WRITER_H_

#include "common/json/writer.h"

#include "absl/strings/str_cat.h"
#include "common/json/base64.h"

namespace sn::json {

void AppendQuoted(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;  // start of the run of bytes that need no escape
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 0xF]);
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

void Writer::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!need_comma_.empty()) {
    if (need_comma_.back()) out_.push_back(',');
    need_comma_.back() = true;
  }
}

void Writer::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  need_comma_.push_back(false);
}

void Writer::EndObject() {
  out_.push_back('}');
  need_comma_.pop_back();
}

void Writer::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  need_comma_.push_back(false);
}

void Writer::EndArray() {
  out_.push_back(']');
  need_comma_.pop_back();
}

void Writer::Key(std::string_view name) {
  BeforeValue();
  AppendQuoted(name, &out_);
  out_.push_back(':');
  after_key_ = true;
}

void Writer::String(std::string_view s) {
  BeforeValue();
  AppendQuoted(s, &out_);
}

void Writer::Int(int64_t v) {
  BeforeValue();
  absl::StrAppend(&out_, v);
}

void Writer::Bool(bool v) {
  BeforeValue();
  out_.append(v ? "true" : "false");
}

void Writer::Null() {
  BeforeValue();
  out_.append("null");
}

void Writer::Base64String(std::string_view bytes) {
  BeforeValue();
  out_.push_back('"');
  Base64EncodeAppend(bytes, &out_);
  out_.push_back('"');
}

void Writer::Raw(std::string_view json) {
  BeforeValue();
  out_.append(json);
}

}  // namespace sn::json

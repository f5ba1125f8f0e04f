#include "common/json/reader.h"

#include <cstring>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace sn::json {
namespace {

// Bytes that end the ASCII fast path inside a string: '"', '\\', controls and non-ASCII.
constexpr bool IsSpecialByte(unsigned char c) { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80; }

struct SpecialTable {
  bool v[256];
  constexpr SpecialTable() : v() {
    for (int i = 0; i < 256; ++i) v[i] = IsSpecialByte(static_cast<unsigned char>(i));
  }
};
constexpr SpecialTable kSpecial;

constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHighs = 0x8080808080808080ULL;

// True when any of the 8 bytes of `w` is special (exact for existence; SWAR).
inline bool WordHasSpecial(uint64_t w) {
  auto has_zero = [](uint64_t v) { return ((v - kOnes) & ~v & kHighs) != 0; };
  const bool high = (w & kHighs) != 0;
  const bool control = ((w - kOnes * 0x20) & ~w & kHighs) != 0;
  return high || control || has_zero(w ^ (kOnes * '"')) || has_zero(w ^ (kOnes * '\\'));
}

inline bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Length of the valid UTF-8 sequence starting with the non-ASCII byte at s[i], or 0.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) -> unsigned { return static_cast<unsigned char>(s[k]); };
  const size_t n = s.size();
  const unsigned c = b(i);
  auto cont = [&](size_t k, unsigned lo, unsigned hi) { return k < n && b(k) >= lo && b(k) <= hi; };
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1, 0x80, 0xBF) ? 2 : 0;
  if (c == 0xE0) return cont(i + 1, 0xA0, 0xBF) && cont(i + 2, 0x80, 0xBF) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
    return cont(i + 1, 0x80, 0xBF) && cont(i + 2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xED) return cont(i + 1, 0x80, 0x9F) && cont(i + 2, 0x80, 0xBF) ? 3 : 0;  // no surrogates
  if (c == 0xF0)
    return cont(i + 1, 0x90, 0xBF) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3)
    return cont(i + 1, 0x80, 0xBF) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF) ? 4 : 0;
  if (c == 0xF4)
    return cont(i + 1, 0x80, 0x8F) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::string_view ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kObject: return "object";
    case ValueType::kArray: return "array";
    case ValueType::kString: return "string";
    case ValueType::kNumber: return "number";
    case ValueType::kBool: return "boolean";
    case ValueType::kNull: return "null";
  }
  return "?";
}

Reader::Reader(std::string_view input, int base_depth, int max_depth)
    : in_(input), depth_(base_depth), max_depth_(max_depth) {}

absl::Status Reader::Error(std::string_view what) const { return Error(pos_, what); }

absl::Status Reader::Error(size_t at, std::string_view what) const {
  std::string msg = "invalid JSON at byte " + std::to_string(at) + ": ";
  msg.append(what);
  return absl::InvalidArgumentError(msg);
}

void Reader::SkipWhitespace() {
  while (pos_ < in_.size() && IsWs(in_[pos_])) ++pos_;
}

absl::Status Reader::Expect(char c) {
  SkipWhitespace();
  if (pos_ >= in_.size()) return Error("unexpected end of input");
  if (in_[pos_] != c) return Error(std::string("expected '") + c + "'");
  ++pos_;
  return absl::OkStatus();
}

absl::Status Reader::Enter() {
  if (depth_ + 1 > max_depth_) {
    return Error("nesting deeper than " + std::to_string(max_depth_) + " levels");
  }
  ++depth_;
  first_ = true;
  return absl::OkStatus();
}

absl::StatusOr<ValueType> Reader::Peek() {
  SkipWhitespace();
  if (pos_ >= in_.size()) return Error("unexpected end of input, expected a value");
  switch (in_[pos_]) {
    case '{': return ValueType::kObject;
    case '[': return ValueType::kArray;
    case '"': return ValueType::kString;
    case 't':
    case 'f': return ValueType::kBool;
    case 'n': return ValueType::kNull;
    default:
      if (in_[pos_] == '-' || IsDigit(in_[pos_])) return ValueType::kNumber;
      return Error("expected a value");
  }
}

absl::Status Reader::BeginObject() {
  if (absl::Status s = Expect('{'); !s.ok()) return s;
  return Enter();
}

absl::Status Reader::BeginArray() {
  if (absl::Status s = Expect('['); !s.ok()) return s;
  return Enter();
}

absl::StatusOr<bool> Reader::NextMember(std::string_view* name) {
  SkipWhitespace();
  if (pos_ >= in_.size()) return Error("unexpected end of input in an object");
  if (in_[pos_] == '}') {
    ++pos_;
    --depth_;
    first_ = false;
    return false;
  }
  if (!first_) {
    if (in_[pos_] != ',') return Error("expected ',' or '}'");
    ++pos_;
    SkipWhitespace();
  }
  if (pos_ >= in_.size() || in_[pos_] != '"') return Error("expected a member name");
  absl::StatusOr<std::string_view> s = ReadString(&name_scratch_);
  if (!s.ok()) return s.status();
  *name = *s;
  if (absl::Status e = Expect(':'); !e.ok()) return e;
  first_ = false;
  return true;
}

absl::StatusOr<bool> Reader::NextElement() {
  SkipWhitespace();
  if (pos_ >= in_.size()) return Error("unexpected end of input in an array");
  if (in_[pos_] == ']') {
    ++pos_;
    --depth_;
    first_ = false;
    return false;
  }
  if (!first_) {
    if (in_[pos_] != ',') return Error("expected ',' or ']'");
    ++pos_;
  }
  first_ = false;
  return true;
}

absl::StatusOr<std::string_view> Reader::String() {
  SkipWhitespace();
  if (pos_ >= in_.size() || in_[pos_] != '"') return Error("expected a string");
  return ReadString(&value_scratch_);
}

absl::StatusOr<std::string_view> Reader::ReadString(std::string* scratch) {
  const char* p = in_.data();
  const size_t n = in_.size();
  const size_t start = ++pos_;  // after the opening quote
  size_t i = start;
  size_t seg = start;  // start of the literal run not yet copied to scratch
  bool escaped = false;
  while (true) {
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (WordHasSpecial(w)) break;
      i += 8;
    }
    while (i < n && !kSpecial.v[static_cast<unsigned char>(p[i])]) ++i;
    if (i >= n) return Error(start - 1, "unterminated string");
    const unsigned char c = static_cast<unsigned char>(p[i]);
    if (c == '"') {
      pos_ = i + 1;
      if (!escaped) return std::string_view(p + start, i - start);
      scratch->append(p + seg, i - seg);
      return std::string_view(*scratch);
    }
    if (c == '\\') {
      if (!escaped) {
        scratch->clear();
        escaped = true;
      }
      scratch->append(p + seg, i - seg);
      pos_ = i;
      if (absl::Status s = ReadEscape(scratch); !s.ok()) return s;
      i = pos_;
      seg = i;
      continue;
    }
    if (c < 0x20) return Error(i, "unescaped control character in a string");
    const size_t len = Utf8SequenceLength(in_, i);
    if (len == 0) return Error(i, "invalid UTF-8 in a string");
    i += len;
  }
}

// REQUIRES: in_[pos_] == '\\'. Appends the decoded character and advances past the escape.
absl::Status Reader::ReadEscape(std::string* out) {
  const size_t at = pos_;
  if (pos_ + 1 >= in_.size()) return Error(at, "unterminated escape");
  const char e = in_[pos_ + 1];
  pos_ += 2;
  switch (e) {
    case '"': out->push_back('"'); return absl::OkStatus();
    case '\\': out->push_back('\\'); return absl::OkStatus();
    case '/': out->push_back('/'); return absl::OkStatus();
    case 'b': out->push_back('\b'); return absl::OkStatus();
    case 'f': out->push_back('\f'); return absl::OkStatus();
    case 'n': out->push_back('\n'); return absl::OkStatus();
    case 'r': out->push_back('\r'); return absl::OkStatus();
    case 't': out->push_back('\t'); return absl::OkStatus();
    case 'u': break;
    default: return Error(at, "invalid escape");
  }
  auto hex4 = [&](size_t from) -> int {
    if (from + 4 > in_.size()) return -1;
    int v = 0;
    for (size_t k = from; k < from + 4; ++k) {
      const int h = HexValue(in_[k]);
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    return v;
  };
  const int u = hex4(pos_);
  if (u < 0) return Error(at, "invalid \\u escape");
  pos_ += 4;
  if (u == 0) return Error(at, "\\u0000 is not allowed");
  uint32_t cp = static_cast<uint32_t>(u);
  if (cp >= 0xDC00 && cp <= 0xDFFF) return Error(at, "unpaired surrogate escape");
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    if (pos_ + 2 > in_.size() || in_[pos_] != '\\' || in_[pos_ + 1] != 'u') {
      return Error(at, "unpaired surrogate escape");
    }
    const int lo = hex4(pos_ + 2);
    if (lo < 0xDC00 || lo > 0xDFFF) return Error(at, "unpaired surrogate escape");
    pos_ += 6;
    cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<uint32_t>(lo) - 0xDC00);
  }
  AppendUtf8(cp, out);
  return absl::OkStatus();
}

absl::StatusOr<std::string_view> Reader::Number() {
  SkipWhitespace();
  const size_t start = pos_;
  const size_t n = in_.size();
  if (pos_ < n && in_[pos_] == '-') ++pos_;
  if (pos_ >= n || !IsDigit(in_[pos_])) return Error(start, "expected a number");
  if (in_[pos_] == '0') {
    ++pos_;
    if (pos_ < n && IsDigit(in_[pos_])) return Error(start, "number with a leading zero");
  } else {
    while (pos_ < n && IsDigit(in_[pos_])) ++pos_;
  }
  if (pos_ < n && in_[pos_] == '.') {
    ++pos_;
    if (pos_ >= n || !IsDigit(in_[pos_])) return Error(start, "malformed number fraction");
    while (pos_ < n && IsDigit(in_[pos_])) ++pos_;
  }
  if (pos_ < n && (in_[pos_] == 'e' || in_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < n && (in_[pos_] == '+' || in_[pos_] == '-')) ++pos_;
    if (pos_ >= n || !IsDigit(in_[pos_])) return Error(start, "malformed number exponent");
    while (pos_ < n && IsDigit(in_[pos_])) ++pos_;
  }
  return in_.substr(start, pos_ - start);
}

absl::StatusOr<bool> Reader::Bool() {
  SkipWhitespace();
  if (in_.substr(pos_, 4) == "true") {
    pos_ += 4;
    return true;
  }
  if (in_.substr(pos_, 5) == "false") {
    pos_ += 5;
    return false;
  }
  return Error("expected a boolean");
}

absl::Status Reader::Null() {
  SkipWhitespace();
  if (in_.substr(pos_, 4) != "null") return Error("expected null");
  pos_ += 4;
  return absl::OkStatus();
}

absl::Status Reader::Skip() { return SkipWithDuplicateCheck(); }

absl::Status Reader::SkipWithDuplicateCheck() {
  absl::StatusOr<ValueType> t = Peek();
  if (!t.ok()) return t.status();
  switch (*t) {
    case ValueType::kString: return String().status();
    case ValueType::kNumber: return Number().status();
    case ValueType::kBool: return Bool().status();
    case ValueType::kNull: return Null();
    case ValueType::kArray: {
      if (absl::Status s = BeginArray(); !s.ok()) return s;
      while (true) {
        absl::StatusOr<bool> more = NextElement();
        if (!more.ok()) return more.status();
        if (!*more) return absl::OkStatus();
        if (absl::Status s = SkipWithDuplicateCheck(); !s.ok()) return s;
      }
    }
    case ValueType::kObject: {
      if (absl::Status s = BeginObject(); !s.ok()) return s;
      // Small objects: linear search; large ones switch to a hash set.
      constexpr size_t kLinearLimit = 16;
      std::vector<std::string> names;
      absl::flat_hash_set<std::string> big;
      while (true) {
        std::string_view name;
        const size_t name_at = pos_;
        absl::StatusOr<bool> more = NextMember(&name);
        if (!more.ok()) return more.status();
        if (!*more) return absl::OkStatus();
        bool dup = false;
        if (big.empty() && names.size() < kLinearLimit) {
          for (const std::string& seen : names) dup = dup || seen == name;
          if (!dup) names.emplace_back(name);
        } else {
          if (big.empty()) big.insert(names.begin(), names.end());
          dup = !big.emplace(name).second;
        }
        if (dup) return Error(name_at, "duplicate member " + QuoteNameForMessage(name));
        if (absl::Status s = SkipWithDuplicateCheck(); !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string_view> Reader::Capture() {
  SkipWhitespace();
  const size_t start = pos_;
  if (absl::Status s = Skip(); !s.ok()) return s;
  return in_.substr(start, pos_ - start);
}

absl::Status Reader::Finish() {
  SkipWhitespace();
  if (pos_ != in_.size()) return Error("trailing data after the top-level value");
  return absl::OkStatus();
}

std::optional<int64_t> ParseInt64(std::string_view t) {
  bool neg = false;
  size_t i = 0;
  if (!t.empty() && t[0] == '-') {
    neg = true;
    i = 1;
  }
  if (i >= t.size()) return std::nullopt;
  if (t[i] == '0' && t.size() > i + 1) return std::nullopt;  // leading zero
  if (neg && t[i] == '0') return std::nullopt;               // -0
  uint64_t v = 0;
  const uint64_t limit = neg ? (uint64_t{1} << 63) : (uint64_t{1} << 63) - 1;
  for (; i < t.size(); ++i) {
    if (!IsDigit(t[i])) return std::nullopt;  // fraction, exponent or junk
    const uint64_t d = static_cast<uint64_t>(t[i] - '0');
    if (v > (limit - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  if (neg) return v == (uint64_t{1} << 63) ? INT64_MIN : -static_cast<int64_t>(v);
  return static_cast<int64_t>(v);
}

std::string QuoteNameForMessage(std::string_view name) {
  constexpr size_t kMaxShown = 64;
  bool printable = !name.empty() && name.size() <= kMaxShown;
  for (char c : name) printable = printable && c >= 0x20 && c < 0x7F && c != '\'';
  if (!printable) return "(a name that is not shown)";
  std::string out = "'";
  out.append(name);
  out.push_back('\'');
  return out;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = Utf8SequenceLength(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace sn::json

#include "common/json/base64.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace sn::json {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

struct DecodeTable {
  int8_t v[256];
  constexpr DecodeTable() : v() {
    for (int i = 0; i < 256; ++i) v[i] = -1;
    for (int i = 0; i < 64; ++i) v[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  }
};
constexpr DecodeTable kDecode;

absl::Status NotCanonical() { return absl::InvalidArgumentError("not canonical base64"); }

}  // namespace

size_t Base64DecodedSize(std::string_view e) {
  if (e.empty()) return 0;
  size_t pad = 0;
  if (e.back() == '=') ++pad;
  if (e.size() >= 2 && e[e.size() - 2] == '=') ++pad;
  return e.size() / 4 * 3 - pad;
}

absl::Status Base64Decode(std::string_view e, size_t max_decoded, std::string* out) {
  out->clear();
  if (e.size() % 4 != 0) return NotCanonical();
  if (e.empty()) return absl::OkStatus();
  const size_t decoded = Base64DecodedSize(e);
  if (decoded > max_decoded) {
    return absl::InvalidArgumentError(absl::StrCat("longer than ", max_decoded, " bytes decoded"));
  }
  out->resize(decoded);
  char* o = out->data();
  const unsigned char* p = reinterpret_cast<const unsigned char*>(e.data());
  const size_t full = (e.size() / 4) - 1;  // the last quantum may carry padding
  uint32_t bad = 0;  // accumulates the sign bit of any invalid byte (branch-free fast loop)
  for (size_t q = 0; q < full; ++q, p += 4, o += 3) {
    const int32_t a = kDecode.v[p[0]], b = kDecode.v[p[1]], c = kDecode.v[p[2]], d = kDecode.v[p[3]];
    bad |= static_cast<uint32_t>(a | b | c | d);
    const uint32_t v = (static_cast<uint32_t>(a) << 18) | (static_cast<uint32_t>(b) << 12) |
                       (static_cast<uint32_t>(c) << 6) | static_cast<uint32_t>(d);
    o[0] = static_cast<char>(v >> 16);
    o[1] = static_cast<char>(v >> 8);
    o[2] = static_cast<char>(v);
  }
  if (bad & 0x80000000u) {
    out->clear();
    return NotCanonical();
  }
  // Last quantum: "xxxx", "xxx=" or "xx==".
  const int32_t a = kDecode.v[p[0]], b = kDecode.v[p[1]];
  if (a < 0 || b < 0) {
    out->clear();
    return NotCanonical();
  }
  if (p[2] == '=') {
    if (p[3] != '=' || (b & 0x0F) != 0) {
      out->clear();
      return NotCanonical();
    }
    o[0] = static_cast<char>((a << 2) | (b >> 4));
    return absl::OkStatus();
  }
  const int32_t c = kDecode.v[p[2]];
  if (c < 0) {
    out->clear();
    return NotCanonical();
  }
  if (p[3] == '=') {
    if ((c & 0x03) != 0) {
      out->clear();
      return NotCanonical();
    }
    o[0] = static_cast<char>((a << 2) | (b >> 4));
    o[1] = static_cast<char>(((b & 0x0F) << 4) | (c >> 2));
    return absl::OkStatus();
  }
  const int32_t d = kDecode.v[p[3]];
  if (d < 0) {
    out->clear();
    return NotCanonical();
  }
  o[0] = static_cast<char>((a << 2) | (b >> 4));
  o[1] = static_cast<char>(((b & 0x0F) << 4) | (c >> 2));
  o[2] = static_cast<char>(((c & 0x03) << 6) | d);
  return absl::OkStatus();
}

size_t Base64EncodedSize(size_t raw_size) { return (raw_size + 2) / 3 * 4; }

void Base64EncodeAppend(std::string_view raw, std::string* out) {
  const size_t old = out->size();
  out->resize(old + Base64EncodedSize(raw.size()));
  char* o = out->data() + old;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(raw.data());
  size_t i = 0;
  for (; i + 3 <= raw.size(); i += 3, o += 4) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    o[0] = kAlphabet[v >> 18];
    o[1] = kAlphabet[(v >> 12) & 63];
    o[2] = kAlphabet[(v >> 6) & 63];
    o[3] = kAlphabet[v & 63];
  }
  const size_t rest = raw.size() - i;
  if (rest == 1) {
    const uint32_t v = uint32_t{p[i]} << 16;
    o[0] = kAlphabet[v >> 18];
    o[1] = kAlphabet[(v >> 12) & 63];
    o[2] = '=';
    o[3] = '=';
  } else if (rest == 2) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8);
    o[0] = kAlphabet[v >> 18];
    o[1] = kAlphabet[(v >> 12) & 63];
    o[2] = kAlphabet[(v >> 6) & 63];
    o[3] = '=';
  }
}

std::string Base64Encode(std::string_view raw) {
  std::string out;
  Base64EncodeAppend(raw, &out);
  return out;
}

}  // namespace sn::json

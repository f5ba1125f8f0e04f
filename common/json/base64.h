// Strict base64 (RFC 4648 §4: standard alphabet, '=' padding required, no whitespace or line
// breaks, non-zero padding bits rejected, empty allowed), table-driven.
//
// Why not OpenSSL's EVP base64: EVP_DecodeUpdate is newline-oriented and lenient (it skips
// whitespace, accepts missing padding in places and ignores non-zero padding bits), so two
// spellings of the same bytes would both be accepted. The wire contract (spec/wire.md §2.6)
// admits exactly one spelling per byte string.
#ifndef SANDBOX_NODE_COMMON_JSON_BASE64_H_
#define SANDBOX_NODE_COMMON_JSON_BASE64_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace sn::json {

// The decoded size of a well-formed encoding of `encoded` (looks at length and padding only).
// REQUIRES: encoded.size() % 4 == 0.
size_t Base64DecodedSize(std::string_view encoded);

// Decodes `encoded` into `out` (replacing its contents). Checks the length against
// `max_decoded` BEFORE decoding anything. Errors (InvalidArgument, no echo of the input):
// "not canonical base64" or "longer than N bytes decoded".
absl::Status Base64Decode(std::string_view encoded, size_t max_decoded, std::string* out);

size_t Base64EncodedSize(size_t raw_size);
void Base64EncodeAppend(std::string_view raw, std::string* out);
std::string Base64Encode(std::string_view raw);

}  // namespace sn::json

#endif  // SANDBOX_NODE_COMMON_JSON_BASE64_H_

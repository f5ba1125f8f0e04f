// Secrets and identifiers for devcore: random credentials, tokens and UUIDs from OpenSSL's
// CSPRNG, SHA-256 digests, and constant-time comparison of digests.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_CRYPTO_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_CRYPTO_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sn::devcore {

// `bytes` random bytes as lowercase hex (2 * bytes characters). Unavailable when the CSPRNG
// fails.
absl::StatusOr<std::string> RandomHex(size_t bytes);

// A random (version 4) UUID in lowercase canonical 8-4-4-4-12 form.
absl::StatusOr<std::string> NewUuid();

// SHA-256 of `data` as 64 lowercase hex characters (a wire "digest").
std::string Sha256Hex(std::string_view data);

// Equality of two strings in time that depends only on their lengths (CRYPTO_memcmp).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_CRYPTO_H_

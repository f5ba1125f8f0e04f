// Secrets and identifiers for devcore: random credentials, tokens and UUIDs (common/random.h),
// SHA-256 digests (common/sha256.h), and constant-time comparison of digests.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_CRYPTO_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_CRYPTO_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/random.h"
#include "common/sha256.h"

namespace sn::devcore {

// A random (version 4) UUID in lowercase canonical 8-4-4-4-12 form.
inline absl::StatusOr<std::string> NewUuid() { return NewUuidV4(); }

// Equality of two strings in time that depends only on their lengths (CRYPTO_memcmp).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_CRYPTO_H_

// Random identifiers from OpenSSL's CSPRNG.
#ifndef SANDBOX_NODE_COMMON_RANDOM_H_
#define SANDBOX_NODE_COMMON_RANDOM_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace sn {

// `bytes` random bytes as lowercase hex. Unavailable when the generator fails.
absl::StatusOr<std::string> RandomHex(size_t bytes);

// A random (version 4) uuid in the wire's lowercase canonical form.
absl::StatusOr<std::string> NewUuidV4();

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_RANDOM_H_

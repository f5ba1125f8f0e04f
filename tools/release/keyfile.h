// The console release key on disk: an unencrypted PKCS#8 PEM file, mode 0600, owned by the
// operator who publishes. `release keygen` creates it; `release publish` reads it.
#ifndef SANDBOX_NODE_TOOLS_RELEASE_KEYFILE_H_
#define SANDBOX_NODE_TOOLS_RELEASE_KEYFILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/release/signing.h"

namespace sn::release_tool {

inline constexpr size_t kMaxKeyFileBytes = 16 * 1024;

// Generates a key and publishes it at `path` without ever replacing anything: the PEM is
// written to a private temporary file in the same directory (0600, fsynced), link(2)ed to
// `path` (which fails when `path` exists: AlreadyExists), the temporary name removed and the
// directory fsynced. A crash leaves either no key at `path` or the complete one. Returns the
// public key as base64 of its 32 raw bytes.
absl::StatusOr<std::string> CreatePrivateKeyFile(const std::string& path);

// Reads the key at `path`: a regular file (not a symlink) that neither group nor others may
// read or write (FailedPrecondition naming the mode otherwise), holding an Ed25519 PEM key.
absl::StatusOr<release::PrivateKey> ReadPrivateKeyFile(const std::string& path);

}  // namespace sn::release_tool

#endif  // SANDBOX_NODE_TOOLS_RELEASE_KEYFILE_H_

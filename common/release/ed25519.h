// Ed25519 verification (OpenSSL) of a release manifest's signature against the console release
// key a node trusts. The key is configured as base64 (§2.6 canonical form) of its 32 raw bytes.
// Immutable after construction; Verify may run on any thread.
#ifndef SANDBOX_NODE_COMMON_RELEASE_ED25519_H_
#define SANDBOX_NODE_COMMON_RELEASE_ED25519_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sn::release {

inline constexpr size_t kEd25519PublicKeyBytes = 32;
inline constexpr size_t kEd25519SignatureBytes = 64;

class PublicKey {
 public:
  // InvalidArgument unless `b64` is canonical base64 of exactly 32 bytes that OpenSSL accepts
  // as an Ed25519 public key. A configuration error, not a release failure.
  static absl::StatusOr<PublicKey> FromBase64(std::string_view b64);
  static absl::StatusOr<PublicKey> FromRaw(std::string_view raw32);

  // True iff `signature` (64 raw bytes) is a valid Ed25519 signature of `message` by this key.
  bool Verify(std::string_view message, std::string_view signature) const;

  const std::string& raw() const { return raw_; }
  std::string Base64() const;

 private:
  explicit PublicKey(std::string raw) : raw_(std::move(raw)) {}
  std::string raw_;
};

}  // namespace sn::release

#endif  // SANDBOX_NODE_COMMON_RELEASE_ED25519_H_

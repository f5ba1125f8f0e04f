#include "common/release/ed25519.h"

#include <openssl/evp.h>

#include <memory>

#include "common/json/base64.h"

namespace sn::release {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

PkeyPtr MakeKey(std::string_view raw) {
  return PkeyPtr(EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw.data()), raw.size()));
}

}  // namespace

absl::StatusOr<PublicKey> PublicKey::FromRaw(std::string_view raw32) {
  if (raw32.size() != kEd25519PublicKeyBytes) {
    return absl::InvalidArgumentError("an Ed25519 public key is 32 bytes");
  }
  if (MakeKey(raw32) == nullptr) {
    return absl::InvalidArgumentError("not an Ed25519 public key");
  }
  return PublicKey(std::string(raw32));
}

absl::StatusOr<PublicKey> PublicKey::FromBase64(std::string_view b64) {
  std::string raw;
  absl::Status st = json::Base64Decode(b64, kEd25519PublicKeyBytes, &raw);
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        "the release public key must be canonical base64 of 32 bytes");
  }
  return FromRaw(raw);
}

bool PublicKey::Verify(std::string_view message, std::string_view signature) const {
  if (signature.size() != kEd25519SignatureBytes) return false;
  PkeyPtr key = MakeKey(raw_);
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (key == nullptr || ctx == nullptr) return false;
  // Ed25519 is a one-shot scheme: no digest is named, the whole message is verified at once.
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(),
                          reinterpret_cast<const unsigned char*>(message.data()),
                          message.size()) == 1;
}

std::string PublicKey::Base64() const { return json::Base64Encode(raw_); }

}  // namespace sn::release

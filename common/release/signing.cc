#include "common/release/signing.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <utility>

namespace sn::release {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct CtxFree {
  void operator()(EVP_PKEY_CTX* c) const { EVP_PKEY_CTX_free(c); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

}  // namespace

struct PrivateKey::Key {
  explicit Key(EVP_PKEY* p) : pkey(p) {}
  ~Key() { EVP_PKEY_free(pkey); }
  EVP_PKEY* pkey;
};

namespace {

absl::StatusOr<PublicKey> PublicOf(EVP_PKEY* pkey) {
  unsigned char raw[kEd25519PublicKeyBytes];
  size_t n = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(pkey, raw, &n) != 1 || n != sizeof raw) {
    return absl::InvalidArgumentError("cannot read the Ed25519 public key");
  }
  return PublicKey::FromRaw(std::string_view(reinterpret_cast<const char*>(raw), n));
}

}  // namespace

PrivateKey::PrivateKey(std::unique_ptr<Key> key, PublicKey pub)
    : key_(std::move(key)), public_(std::move(pub)) {}
PrivateKey::PrivateKey(PrivateKey&&) noexcept = default;
PrivateKey& PrivateKey::operator=(PrivateKey&&) noexcept = default;
PrivateKey::~PrivateKey() = default;

absl::StatusOr<PrivateKey> PrivateKey::Generate() {
  std::unique_ptr<EVP_PKEY_CTX, CtxFree> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
  EVP_PKEY* pkey = nullptr;
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
      EVP_PKEY_keygen(ctx.get(), &pkey) != 1) {
    return absl::UnavailableError("Ed25519 key generation failed");
  }
  auto key = std::make_unique<Key>(pkey);
  absl::StatusOr<PublicKey> pub = PublicOf(pkey);
  if (!pub.ok()) return pub.status();
  return PrivateKey(std::move(key), *std::move(pub));
}

absl::StatusOr<PrivateKey> PrivateKey::FromPem(std::string_view pem) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio == nullptr) return absl::UnavailableError("out of memory");
  // No passphrase callback: an encrypted key is refused rather than prompted for.
  EVP_PKEY* pkey = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, const_cast<char*>(""));
  if (pkey == nullptr) return absl::InvalidArgumentError("not a PEM private key");
  auto key = std::make_unique<Key>(pkey);
  if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
    return absl::InvalidArgumentError("the private key is not an Ed25519 key");
  }
  absl::StatusOr<PublicKey> pub = PublicOf(pkey);
  if (!pub.ok()) return pub.status();
  return PrivateKey(std::move(key), *std::move(pub));
}

absl::StatusOr<std::string> PrivateKey::ToPem() const {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr ||
      PEM_write_bio_PrivateKey(bio.get(), key_->pkey, nullptr, nullptr, 0, nullptr, nullptr) !=
          1) {
    return absl::UnavailableError("cannot encode the private key");
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  if (n <= 0 || data == nullptr) return absl::UnavailableError("cannot encode the private key");
  return std::string(data, static_cast<size_t>(n));
}

PublicKey PrivateKey::public_key() const { return public_; }

absl::StatusOr<std::string> PrivateKey::Sign(std::string_view message) const {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  unsigned char sig[kEd25519SignatureBytes];
  size_t n = sizeof sig;
  if (ctx == nullptr ||
      EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &n, reinterpret_cast<const unsigned char*>(message.data()),
                     message.size()) != 1 ||
      n != sizeof sig) {
    return absl::UnavailableError("Ed25519 signing failed");
  }
  return std::string(reinterpret_cast<const char*>(sig), n);
}

}  // namespace sn::release

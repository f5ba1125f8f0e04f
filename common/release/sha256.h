// Streaming SHA-256 (OpenSSL EVP) with lowercase-hex output, the wire's "digest" form.
// Thread-compatible: one hasher per stream.
#ifndef SANDBOX_NODE_COMMON_RELEASE_SHA256_H_
#define SANDBOX_NODE_COMMON_RELEASE_SHA256_H_

#include <memory>
#include <string>
#include <string_view>

namespace sn::release {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  // The digest of everything updated so far, as 64 lowercase hex characters. The hasher is
  // finished afterwards: call nothing but the destructor.
  std::string FinishHex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// SHA-256 of `bytes` as 64 lowercase hex characters.
std::string Sha256Hex(std::string_view bytes);

}  // namespace sn::release

#endif  // SANDBOX_NODE_COMMON_RELEASE_SHA256_H_

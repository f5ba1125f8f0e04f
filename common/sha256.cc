#include "common/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace sn {
namespace {

std::string Hex(const unsigned char* md, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

}  // namespace

struct Sha256Stream::State {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256Stream::Sha256Stream() : state_(new State) {
  state_->ctx = EVP_MD_CTX_new();
  // Allocation or initialisation failure of a digest context is not recoverable here.
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1) {
    abort();
  }
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(state_->ctx); }

void Sha256Stream::Update(std::string_view bytes) {
  if (EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size()) != 1) abort();
}

std::string Sha256Stream::FinishHex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(state_->ctx, md, &n) != 1) abort();
  return Hex(md, n);
}

std::string Sha256Hex(std::string_view bytes) {
  Sha256Stream s;
  s.Update(bytes);
  return s.FinishHex();
}

}  // namespace sn

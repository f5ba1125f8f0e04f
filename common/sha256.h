// SHA-256 (OpenSSL) as the lowercase hex the spec calls a "digest", whole or streamed.
#ifndef SANDBOX_NODE_COMMON_SHA256_H_
#define SANDBOX_NODE_COMMON_SHA256_H_

#include <memory>
#include <string>
#include <string_view>

namespace sn {

// The lowercase hex SHA-256 of `bytes` (64 characters).
std::string Sha256Hex(std::string_view bytes);

// Incremental SHA-256 for bytes that arrive in pieces (artifacts, image archives).
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;

  void Update(std::string_view bytes);
  // The lowercase hex digest of everything given so far. REQUIRES: called once.
  std::string FinishHex();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_SHA256_H_

// The minimal tar (ustar + PAX) the Docker archive API needs: one regular file written, and
// the first entry of a stream read incrementally.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_TAR_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_TAR_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace sn::native::docker {

// A tar archive holding one regular file `name` (no '/'), permission bits `mode`, owner 0:0.
// Names over 100 bytes get a PAX path record.
std::string TarOneFile(std::string_view name, uint32_t mode, std::string_view content);

// The same archive as three pieces, so the content is sent without being copied: `head`, then
// the `size` content bytes, then `tail` (padding and the end-of-archive blocks).
struct TarFraming {
  std::string head;
  std::string tail;
};
TarFraming TarOneFileFraming(std::string_view name, uint32_t mode, uint64_t size);

// Reads the first real entry of a tar stream (PAX/GNU extension headers skipped), keeping at
// most `max_bytes` of its content (reserved once, from the entry's size). Feed() returns false
// once nothing more is needed, so the caller stops reading the stream.
class TarFirstEntryReader {
 public:
  explicit TarFirstEntryReader(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  bool Feed(std::string_view data);

  // After the stream ended or Feed() returned false:
  bool header_seen() const { return header_seen_; }
  absl::Status error() const { return error_; }
  char type() const { return type_; }             // '0' regular, '2' symlink, '5' dir, ...
  uint64_t size() const { return size_; }         // the entry's full size
  const std::string& content() const { return content_; }  // first min(size, max_bytes)
  std::string TakeContent() { return std::move(content_); }
  const std::string& link_target() const { return link_; }
  bool complete() const;  // all wanted content bytes arrived

 private:
  bool ParseHeader();

  const uint64_t max_bytes_;
  std::string header_;  // accumulating 512-byte header
  uint64_t skip_ = 0;   // bytes of an extension entry (with padding) still to skip
  bool header_seen_ = false;
  char type_ = 0;
  uint64_t size_ = 0;
  std::string content_;
  std::string link_;
  absl::Status error_;
};

}  // namespace sn::native::docker

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_DOCKER_TAR_H_

// The installer's lines about an artifact while it downloads, at common/progress_limiter.h's
// rate: its first bytes, every tenth of them or 5 s after the last line (whichever comes
// first), and its last byte, each as
//   <name>: downloaded <X> of <N> bytes (<P> %)
// X is root's own count of the bytes it accepted (fetcher.h, on_artifact_bytes), N the size
// the verified manifest declares. Not thread-safe; the installer's one thread.
#ifndef SANDBOX_NODE_TOOLS_INSTALL_DOWNLOAD_PROGRESS_H_
#define SANDBOX_NODE_TOOLS_INSTALL_DOWNLOAD_PROGRESS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/progress_limiter.h"
#include "common/wire/http_bodies.h"

namespace sn::install {

class DownloadProgress {
 public:
  explicit DownloadProgress(const Clock* clock) : clock_(clock) {}

  // The line due now that `done` bytes of `a` are written, if one is.
  std::optional<std::string> Line(const wire::RuntimeArtifact& a, uint64_t done);

 private:
  const Clock* clock_;
  ProgressLimiter lines_;
};

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_DOWNLOAD_PROGRESS_H_

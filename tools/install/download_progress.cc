#include "tools/install/download_progress.h"

#include "absl/strings/str_cat.h"

namespace sn::install {

std::optional<std::string> DownloadProgress::Line(const wire::RuntimeArtifact& a, uint64_t done) {
  const uint64_t total = a.size > 0 ? static_cast<uint64_t>(a.size) : 0;
  if (!lines_.Due(clock_->Monotonic(), a.name, done, total)) return std::nullopt;
  const uint64_t percent = total == 0 ? 100 : static_cast<uint64_t>(
                                                  static_cast<long double>(done) * 100 / total);
  return absl::StrCat(a.name, ": downloaded ", done, " of ", total, " bytes (", percent, " %)");
}

}  // namespace sn::install

#include "tools/install/layout.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace sn::install {

std::string Layout::Binary(std::string_view name) const {
  return absl::StrCat(BinDir(), "/", std::string(name));
}

std::string Layout::Unit(std::string_view name) const {
  return absl::StrCat(UnitDir(), "/", std::string(name));
}

absl::StatusOr<Layout> MakeLayout(std::string_view root) {
  Layout layout;
  if (!root.empty()) {
    if (root[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("--root must be an absolute path, not ", std::string(root)));
    }
    std::vector<std::string> parts;
    for (absl::string_view part :
         absl::StrSplit(absl::string_view(root.data(), root.size()), '/', absl::SkipEmpty())) {
      if (part == "." || part == "..") {
        return absl::InvalidArgumentError(
            absl::StrCat("--root must not contain . or .. components: ", std::string(root)));
      }
      parts.emplace_back(part);
    }
    if (!parts.empty()) layout.root = absl::StrCat("/", absl::StrJoin(parts, "/"));
  }
  constexpr size_t kMaxUnixPath = 107;
  if (layout.Socket().size() > kMaxUnixPath) {
    return absl::InvalidArgumentError(absl::StrCat("--root is too long: privhelper's socket ",
                                                   layout.Socket(), " exceeds ", kMaxUnixPath,
                                                   " bytes"));
  }
  return layout;
}

}  // namespace sn::install

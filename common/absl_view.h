// AV(): a std::string_view as an absl::string_view, without a copy. Debian's Abseil is built
// with its own string_view type (not an alias of std::string_view), so passing a
// std::string_view to an Abseil function (StrSplit, SimpleAtoi, StartsWith…) needs this.
#ifndef SANDBOX_NODE_COMMON_ABSL_VIEW_H_
#define SANDBOX_NODE_COMMON_ABSL_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace sn {

inline absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_ABSL_VIEW_H_

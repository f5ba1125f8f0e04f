#include "common/wait_scale.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sn {
namespace {
int divisor = 1;
}  // namespace

absl::Duration ScaledWait(absl::Duration wait) { return wait / divisor; }

absl::StatusOr<int> ParseWaitDivisor(const char* text) {
  const std::string s = text == nullptr ? "" : text;
  int value = 0;
  bool ok = !s.empty() && s.size() <= 2;
  for (char c : s) {
    ok = ok && c >= '0' && c <= '9';
    value = value * 10 + (c - '0');
  }
  if (!ok || value < 1 || value > kMaxWaitDivisor) {
    return absl::InvalidArgumentError(absl::StrCat(kWaitDivisorEnv, "=\"", s,
                                                   "\": a decimal from 1 to ", kMaxWaitDivisor,
                                                   " is required"));
  }
  return value;
}

void SetWaitDivisor(int d) { divisor = d; }

}  // namespace sn

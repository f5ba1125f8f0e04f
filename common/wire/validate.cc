#include "common/wire/validate.h"

#include "common/json/reader.h"
#include "common/wire/limits.h"

namespace sn::wire {
namespace {

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsAlpha(char c) { return IsLower(c) || (c >= 'A' && c <= 'Z'); }
bool IsAlnum(char c) { return IsAlpha(c) || IsDigit(c); }

// Digits s[from, from+n) as a number; -1 if any is not a digit.
int Digits(std::string_view s, size_t from, size_t n) {
  int v = 0;
  for (size_t i = from; i < from + n; ++i) {
    if (!IsDigit(s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

bool IsReleaseLikeName(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max || !IsAlnum(s[0])) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

}  // namespace

bool IsWireString(std::string_view s, size_t max_bytes) {
  return s.size() <= max_bytes && s.find('\0') == std::string_view::npos &&
         json::IsValidUtf8(s);
}

bool IsUuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return false;
    } else if (!IsLowerHex(s[i])) {
      return false;
    }
  }
  return true;
}

bool IsDigest(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!IsLowerHex(c)) return false;
  }
  return true;
}

bool IsCode(std::string_view s) {
  if (s.empty() || s.size() > kMaxCodeBytes || !IsLower(s[0])) return false;
  for (char c : s) {
    if (!IsLower(c) && !IsDigit(c) && c != '_') return false;
  }
  return true;
}

bool IsTimestamp(std::string_view s) {
  // 2026-11-29T12:00:00Z is 20 bytes; with 1..9 fraction digits and the dot, up to 30.
  if (s.size() < 20 || s.back() != 'Z') return false;
  if (s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':') return false;
  const int year = Digits(s, 0, 4), month = Digits(s, 5, 2), day = Digits(s, 8, 2);
  const int hour = Digits(s, 11, 2), minute = Digits(s, 14, 2), second = Digits(s, 17, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1) return false;
  if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59) return false;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  const int max_day = kDays[month - 1] + ((month == 2 && leap) ? 1 : 0);
  if (day > max_day) return false;
  if (s.size() == 20) return true;
  if (s[19] != '.') return false;
  const size_t frac = s.size() - 21;  // between '.' and 'Z'
  if (frac < 1 || frac > static_cast<size_t>(kMaxFractionDigits)) return false;
  for (size_t i = 20; i < s.size() - 1; ++i) {
    if (!IsDigit(s[i])) return false;
  }
  return true;
}

bool IsLoadAverage(std::string_view s) {
  size_t i = 0;
  if (s.empty() || !IsDigit(s[0])) return false;
  if (s[0] == '0') {
    i = 1;
  } else {
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i > static_cast<size_t>(kMaxLoadIntegerDigits)) return false;
  }
  if (i == s.size()) return true;
  if (s[i] != '.') return false;
  const size_t frac = s.size() - i - 1;
  if (frac < 1 || frac > static_cast<size_t>(kMaxLoadFractionDigits)) return false;
  for (size_t k = i + 1; k < s.size(); ++k) {
    if (!IsDigit(s[k])) return false;
  }
  return true;
}

bool IsSandboxPath(std::string_view s) {
  if (s.empty() || s.size() > kMaxPathBytes || s[0] != '/') return false;
  size_t start = 1;
  while (true) {
    const size_t slash = s.find('/', start);
    const std::string_view comp =
        s.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (comp.empty() || comp == "." || comp == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

bool IsEnvKey(std::string_view s) {
  if (s.empty() || s.size() > kMaxEnvKeyBytes) return false;
  if (!IsAlpha(s[0]) && s[0] != '_') return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '_') return false;
  }
  return true;
}

bool IsReleaseSource(std::string_view s) { return IsReleaseLikeName(s, kMaxReleaseSourceBytes); }

bool IsArtifactName(std::string_view s) { return IsReleaseLikeName(s, kMaxArtifactNameBytes); }

}  // namespace sn::wire

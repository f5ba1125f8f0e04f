#include "privhelper/rpc/proc_locks.h"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <charconv>
#include <string>

#include "absl/strings/str_split.h"

namespace sn::privhelper {
namespace {

template <typename T>
bool ParseNumber(std::string_view s, int base, T* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

}  // namespace

LockHolders ParseProcLocks(std::string_view text) {
  LockHolders out;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->" after the id.
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 6 || f[1] != "FLOCK") continue;
    std::vector<absl::string_view> id = absl::StrSplit(f[5], ':');
    unsigned int major = 0, minor = 0;
    uint64_t ino = 0;
    pid_t pid = 0;
    if (id.size() != 3 || !ParseNumber(std::string_view(id[0].data(), id[0].size()), 16, &major) ||
        !ParseNumber(std::string_view(id[1].data(), id[1].size()), 16, &minor) ||
        !ParseNumber(std::string_view(id[2].data(), id[2].size()), 10, &ino) ||
        !ParseNumber(std::string_view(f[4].data(), f[4].size()), 10, &pid) || pid <= 0) {
      continue;
    }
    out[{static_cast<uint64_t>(makedev(major, minor)), ino}].push_back(pid);
  }
  return out;
}

LockHolders ReadProcLocks() {
  int fd = open("/proc/locks", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[16384];
  while (text.size() < kMaxProcLocksBytes) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return ParseProcLocks(text);
}

}  // namespace sn::privhelper

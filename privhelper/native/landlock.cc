#include "privhelper/native/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sn::native {
namespace {

// Every filesystem right the kernel's ABI knows (so each is denied unless a rule grants it).
uint64_t HandledRights(int abi) {
  uint64_t rights = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: bits 0..12
  if (abi >= 2) rights |= uint64_t{1} << 13;                 // REFER
  if (abi >= 3) rights |= uint64_t{1} << 14;                 // TRUNCATE
  if (abi >= 5) rights |= uint64_t{1} << 15;                 // IOCTL_DEV
  return rights;
}

}  // namespace

absl::Status RestrictToReading(std::span<const std::string> dirs) {
  const long abi =
      syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Landlock is not available (", std::strerror(errno),
        "): the kernel needs CONFIG_SECURITY_LANDLOCK and \"landlock\" in its LSM list"));
  }
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = HandledRights(static_cast<int>(abi));
  const int ruleset =
      static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (ruleset < 0) {
    return absl::InternalError(absl::StrCat("landlock_create_ruleset: ", std::strerror(errno)));
  }
  for (const std::string& dir : dirs) {
    landlock_path_beneath_attr rule{};
    rule.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
    rule.parent_fd = open(dir.c_str(), O_PATH | O_CLOEXEC | O_DIRECTORY);
    const int err = errno;
    if (rule.parent_fd < 0 ||
        syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0) {
      const int e = rule.parent_fd < 0 ? err : errno;
      if (rule.parent_fd >= 0) close(rule.parent_fd);
      close(ruleset);
      return absl::FailedPreconditionError(
          absl::StrCat("Landlock rule for ", dir, ": ", std::strerror(e)));
    }
    close(rule.parent_fd);
  }
  const long rc = syscall(SYS_landlock_restrict_self, ruleset, 0);
  const int err = errno;
  close(ruleset);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("landlock_restrict_self: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace sn::native

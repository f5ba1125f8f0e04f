#include "privhelper/capabilities.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"

namespace sn::privhelper {
namespace {

// The "Threads:" count of /proc/self/status; -1 when it cannot be read.
int ThreadCount() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

}  // namespace

uint64_t KeptCapabilities() { return uint64_t{1} << CAP_SETPCAP; }

absl::Status DropCapabilitiesAfterStartup(uint64_t extra) {
  if (int threads = ThreadCount(); threads != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "capabilities are dropped before any thread starts, but privhelper has ", threads));
  }
  const uint64_t kept = KeptCapabilities() | extra;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
  if (syscall(SYS_capget, &header, data) != 0) return ErrnoStatus(errno, "capget");
  const uint64_t permitted = (uint64_t{data[1].permitted} << 32) | data[0].permitted;
  const uint64_t effective = (uint64_t{data[1].effective} << 32) | data[0].effective;
  // The bounding set first: dropping from it needs CAP_SETPCAP, which stays. Without it (a unit
  // that withholds it) no helper can start anyway, and the sets below are still emptied.
  for (int cap = 0; cap < 64 && ((effective >> CAP_SETPCAP) & 1); ++cap) {
    if ((kept >> cap) & 1) continue;
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;  // past the kernel's last capability
      return ErrnoStatus(errno, absl::StrCat("drop capability ", cap, " from the bounding set"));
    }
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    return ErrnoStatus(errno, "clear the ambient capabilities");
  }
  const uint64_t keep = permitted & kept;
  memset(data, 0, sizeof data);
  data[0].permitted = data[0].effective = static_cast<uint32_t>(keep);
  data[1].permitted = data[1].effective = static_cast<uint32_t>(keep >> 32);
  if (syscall(SYS_capset, &header, data) != 0) return ErrnoStatus(errno, "capset");
  return absl::OkStatus();
}

}  // namespace sn::privhelper

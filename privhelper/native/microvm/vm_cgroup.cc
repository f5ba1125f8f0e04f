#include "privhelper/native/microvm/vm_cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace sn::microvm {
namespace {

// A mountinfo field with its octal escapes (\040 for a space, ...) undone.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && s.size() - i >= 4 && s[i + 1] >= '0' &&
        s[i + 1] <= '3' && s[i + 2] >= '0' && s[i + 2] <= '7' &&
        s[i + 3] >= '0' && s[i + 3] <= '7') {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 +
                                      (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string_view SVw(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}

bool HasWord(std::string_view list, char sep, std::string_view word) {
  for (absl::string_view w : absl::StrSplit(AV(list), sep)) {
    if (absl::StripAsciiWhitespace(w) == AV(word))
      return true;
  }
  return false;
}

// A whole small file written in one write (a cgroup knob).
absl::Status WriteKnob(const std::string &path, const std::string &value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return ErrnoStatus(errno, "open " + path);
  const ssize_t n = write(fd, value.data(), value.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return ErrnoStatus(n < 0 ? err : EIO,
                       absl::StrCat("writing \"", value, "\" to ", path));
  }
  return absl::OkStatus();
}

// 1 or 2 when `dir` is a directory of a cgroup filesystem.
absl::StatusOr<int> CgroupVersionOf(const std::string &dir) {
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) != 0)
    return ErrnoStatus(errno, "statfs " + dir);
  if (fs.f_type == CGROUP_SUPER_MAGIC)
    return 1;
  if (fs.f_type == CGROUP2_SUPER_MAGIC)
    return 2;
  return absl::FailedPreconditionError(
      absl::StrCat(dir, " is not on a cgroup filesystem"));
}

// A kernel-made text file (procfs, cgroupfs: their size reads as 0) to its end,
// at most `max` bytes.
absl::StatusOr<std::string> ReadKernelText(const std::string &path,
                                           size_t max) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return ErrnoStatus(errno, "open " + path);
  std::string out;
  char buf[8192];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return ErrnoStatus(err, "read " + path);
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max) {
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": more than ", max, " bytes"));
    }
  }
  close(fd);
  return out;
}

std::string Parent(const std::string &path) {
  return path.substr(0, path.rfind('/'));
}

} // namespace

absl::StatusOr<CpuHierarchy> FindCpuHierarchy(
    std::string_view mountinfo,
    const std::function<std::string(const std::string &)> &v2_controllers) {
  std::string v2_mount;
  for (absl::string_view line :
       absl::StrSplit(AV(mountinfo), '\n', absl::SkipEmpty())) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE
    // SUPEROPTIONS
    std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-")
      ++dash;
    if (f.size() < 5 || dash + 3 >= f.size())
      continue;
    const absl::string_view type = f[dash + 1];
    const std::string mount = Unescape(SVw(f[4]));
    if (type == "cgroup" && HasWord(SVw(f[dash + 3]), ',', "cpu")) {
      return CpuHierarchy{mount, 1};
    }
    if (type == "cgroup2" && v2_mount.empty())
      v2_mount = mount;
  }
  if (!v2_mount.empty()) {
    if (HasWord(v2_controllers(v2_mount), ' ', "cpu"))
      return CpuHierarchy{v2_mount, 2};
    return absl::NotFoundError(absl::StrCat(
        "the cgroup v2 hierarchy at ", v2_mount,
        " does not offer the cpu controller (its cgroup.controllers lacks "
        "\"cpu\"), and no "
        "cgroup v1 hierarchy has it: a VM's CPU quota cannot be set"));
  }
  return absl::NotFoundError("no cgroup hierarchy with the cpu controller is "
                             "mounted: a VM's CPU quota cannot be set");
}

absl::StatusOr<CpuHierarchy> FindCpuHierarchy() {
  absl::StatusOr<std::string> mountinfo =
      ReadKernelText("/proc/self/mountinfo", 4 << 20);
  if (!mountinfo.ok())
    return mountinfo.status();
  return FindCpuHierarchy(*mountinfo, [](const std::string &mount) {
    absl::StatusOr<std::string> c =
        ReadKernelText(mount + "/cgroup.controllers", 4096);
    return c.ok() ? *c : std::string();
  });
}

absl::StatusOr<std::string> MakeVmCgroupParent(const CpuHierarchy &h) {
  const std::string parent = absl::StrCat(h.mount, "/", kVmCgroupParent);
  if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, "mkdir " + parent);
  }
  absl::StatusOr<int> version = CgroupVersionOf(parent);
  if (!version.ok())
    return version.status();
  if (*version == 2) {
    absl::StatusOr<std::string> enabled =
        ReadKernelText(parent + "/cgroup.subtree_control", 4096);
    if (!enabled.ok())
      return enabled.status();
    if (!HasWord(*enabled, ' ', "cpu")) {
      if (absl::Status s =
              WriteKnob(parent + "/cgroup.subtree_control", "+cpu");
          !s.ok()) {
        return s;
      }
    }
  }
  return parent;
}

absl::StatusOr<CpuBandwidth> BandwidthFor(int64_t cpu_millis) {
  if (cpu_millis < 1 || cpu_millis > 256000) {
    return absl::InvalidArgumentError("cpu_millis must be 1..256000");
  }
  if (cpu_millis >= 10)
    return CpuBandwidth{cpu_millis * 100, 100000};
  return CpuBandwidth{cpu_millis * 1000, 1000000};
}

absl::Status PrepareVmCgroup(const std::string &leaf, int64_t cpu_millis) {
  absl::StatusOr<CpuBandwidth> bw = BandwidthFor(cpu_millis);
  if (!bw.ok())
    return bw.status();
  const std::string name = leaf.substr(leaf.rfind('/') + 1);
  if (leaf.empty() || leaf[0] != '/' || name.empty() || name == "." ||
      name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("not a cgroup path: ", leaf));
  }
  absl::StatusOr<int> version = CgroupVersionOf(Parent(leaf));
  if (!version.ok())
    return version.status();
  if (mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST)
    return ErrnoStatus(errno, "mkdir " + leaf);
  absl::StatusOr<int> leaf_version =
      CgroupVersionOf(leaf); // not a file or link put there
  if (!leaf_version.ok())
    return leaf_version.status();
  if (*version == 1) {
    // The period first: a quota is checked against the period in force.
    RETURN_IF_ERROR(WriteKnob(leaf + "/cpu.cfs_quota_us", "-1"));
    RETURN_IF_ERROR(
        WriteKnob(leaf + "/cpu.cfs_period_us", absl::StrCat(bw->period_us)));
    return WriteKnob(leaf + "/cpu.cfs_quota_us", absl::StrCat(bw->quota_us));
  }
  return WriteKnob(leaf + "/cpu.max",
                   absl::StrCat(bw->quota_us, " ", bw->period_us));
}

int EnterCgroup(const char *procs) {
  const int fd = open(procs, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return errno;
  const ssize_t n = write(fd, "0\n", 2);
  const int err = n == 2 ? 0 : (n < 0 ? errno : EIO);
  close(fd);
  return err;
}

absl::Status RemoveVmCgroup(const std::string &leaf) {
  for (int attempt = 0;; ++attempt) {
    if (rmdir(leaf.c_str()) == 0 || errno == ENOENT)
      return absl::OkStatus();
    if (errno != EBUSY || attempt >= 100)
      return ErrnoStatus(errno, "rmdir " + leaf);
    usleep(10000);
  }
}

} // namespace sn::microvm

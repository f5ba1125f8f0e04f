// The CPU controller's hierarchy found from mountinfo (v1 split and joined,
// hybrid, v2 with and without "cpu", escaped mount points) and the quota of
// exactly cpu_millis.
#include "privhelper/native/microvm/vm_cgroup.h"

#include <string>

#include "gtest/gtest.h"

namespace sn::microvm {
namespace {

std::string NoV2(const std::string &) { return ""; }

// This machine's layout: cgroup v1 with each controller its own hierarchy, plus
// the unified (v2) hierarchy with no controller (hybrid).
constexpr char kHybridSplit[] =
    "31 23 0:28 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs "
    "ro,size=4096k,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup "
    "rw,cpuacct\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(FindCpuHierarchy, CgroupV1WithSplitOrJoinedControllers) {
  absl::StatusOr<CpuHierarchy> h = FindCpuHierarchy(kHybridSplit, NoV2);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->mount, "/sys/fs/cgroup/cpu");
  EXPECT_EQ(h->version, 1);
  // Debian's usual v1 layout: cpu and cpuacct joined; an optional field before
  // the "-".
  h = FindCpuHierarchy("40 31 0:35 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid "
                       "shared:17 - cgroup cgroup "
                       "rw,cpu,cpuacct\n",
                       NoV2);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->mount, "/sys/fs/cgroup/cpu,cpuacct");
  // "cpuacct" or "cpuset" alone is not the cpu controller.
  h = FindCpuHierarchy(
      "33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
      "34 31 0:31 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n",
      NoV2);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kNotFound);
}

TEST(FindCpuHierarchy, CgroupV2OnlyWhenItOffersCpu) {
  const char v2[] = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 "
                    "cgroup2 rw,nsdelegate\n";
  absl::StatusOr<CpuHierarchy> h =
      FindCpuHierarchy(v2, [](const std::string &m) {
        EXPECT_EQ(m, "/sys/fs/cgroup");
        return std::string("cpuset cpu io memory pids\n");
      });
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->mount, "/sys/fs/cgroup");
  EXPECT_EQ(h->version, 2);
  h = FindCpuHierarchy(v2, [](const std::string &) {
    return std::string("cpuset io memory\n");
  });
  EXPECT_EQ(h.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(h.status().message().find("lacks \"cpu\""), std::string::npos)
      << h.status();
  // A hybrid host's v2 hierarchy has no controllers; the v1 "cpu" one wins
  // wherever it is.
  h = FindCpuHierarchy(std::string(kHybridSplit), NoV2);
  EXPECT_EQ(h->version, 1);
}

TEST(FindCpuHierarchy, EscapedMountPointsAndGarbage) {
  absl::StatusOr<CpuHierarchy> h = FindCpuHierarchy(
      "garbage\n\n1 2 3\n"
      "32 31 0:29 / /mnt/my\\040cgroups rw - cgroup cgroup rw,cpu\n",
      NoV2);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->mount, "/mnt/my cgroups");
  EXPECT_EQ(FindCpuHierarchy("", NoV2).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(BandwidthFor, ExactlyCpuMillis) {
  for (int64_t m : {1, 2, 9, 10, 11, 999, 1000, 1500, 255999, 256000}) {
    SCOPED_TRACE(m);
    absl::StatusOr<CpuBandwidth> b = BandwidthFor(m);
    ASSERT_TRUE(b.ok()) << b.status();
    // quota / period == m / 1000, within the kernel's bounds (quota and period
    // ≥ 1 ms, period ≤ 1 s).
    EXPECT_EQ(b->quota_us * 1000, m * b->period_us);
    EXPECT_GE(b->quota_us, 1000);
    EXPECT_GE(b->period_us, 1000);
    EXPECT_LE(b->period_us, 1000000);
  }
  EXPECT_EQ(BandwidthFor(0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BandwidthFor(256001).status().code(),
            absl::StatusCode::kInvalidArgument);
}

} // namespace
} // namespace sn::microvm

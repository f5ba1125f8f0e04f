#include "privhelper/microvm/kvm_probe.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>

#include "gtest/gtest.h"

namespace sn::microvm {
namespace {

TEST(KvmProbeTest, AMissingDeviceIsNotUsableAndSaysSo) {
  KvmProbe p = ProbeKvm("/nonexistent/kvm");
  EXPECT_FALSE(p.usable);
  EXPECT_NE(p.reason.find("does not open"), std::string::npos) << p.reason;
}

TEST(KvmProbeTest, TheHostsKvmIsProbedWithinTheDeadline) {
  // Whatever this host's KVM can do, the probe ends by its deadline (plus the time to kill
  // and reap its child on a loaded machine) and explains a "not usable".
  const absl::Time start = absl::Now();
  KvmProbe p = ProbeKvm(kKvmDevice, absl::Milliseconds(500));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(p.usable, p.reason.empty()) << p.reason;
  std::printf("this host: KVM %s (%s) after %s\n", p.usable ? "usable" : "not usable",
              p.reason.c_str(), absl::FormatDuration(p.took).c_str());
}

TEST(KvmProbeTest, TheAcceleratorFollowsTheConfigurationAndTheProbe) {
  KvmProbe usable{true, "", absl::Milliseconds(3)};
  KvmProbe slow{false, "too slow", absl::Milliseconds(500)};
  EXPECT_EQ(*ChooseAccel("auto", usable), "kvm");
  EXPECT_EQ(*ChooseAccel("auto", slow), "tcg");
  EXPECT_EQ(*ChooseAccel("tcg", usable), "tcg");
  EXPECT_EQ(*ChooseAccel("kvm", usable), "kvm");
  absl::StatusOr<std::string> refused = ChooseAccel("kvm", slow);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status()));
  EXPECT_NE(refused.status().message().find("too slow"), absl::string_view::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(ChooseAccel("hvf", usable).status()));
}

TEST(KvmProbeTest, QemusVersionIsReadAndAnythingElseIsRefused) {
  const std::string fake = std::string(std::getenv("TEST_TMPDIR")) + "/fake-qemu";
  std::ofstream(fake) << "#!/bin/sh\necho 'not an emulator'\n";
  chmod(fake.c_str(), 0755);
  EXPECT_TRUE(absl::IsFailedPrecondition(QemuVersion(fake).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(QemuVersion("/nonexistent/qemu").status()));
  const std::string qemu = "/usr/bin/qemu-system-x86_64";
  struct stat st;
  if (stat(qemu.c_str(), &st) != 0) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true") FAIL() << qemu << " missing (CI=true)";
    GTEST_SKIP() << "SKIPPED LOUDLY: " << qemu << " is missing";
  }
  absl::StatusOr<std::string> v = QemuVersion(qemu);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(std::regex_match(*v, std::regex("[0-9]+\\.[0-9]+\\.[0-9]+"))) << *v;
  EXPECT_EQ(MicrovmFingerprint(*v, "tcg"), "microvm/qemu-" + *v + " tcg");
}

}  // namespace
}  // namespace sn::microvm

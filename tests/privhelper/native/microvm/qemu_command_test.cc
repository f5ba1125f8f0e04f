#include "privhelper/native/microvm/qemu_command.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sn::microvm {
namespace {

VmFiles Files() {
  return {"/store/kernel", "/store/bios", "/store/initramfs", "/vm/disk.qcow2"};
}

VmShape Shape() { return {"tcg", 1500, 100 << 20, 2}; }

std::string After(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

TEST(QemuCommandTest, VcpusAreTheCeilingOfCpuMillisBoundedByTheHost) {
  EXPECT_EQ(Vcpus(1, 8), 1);
  EXPECT_EQ(Vcpus(1000, 8), 1);
  EXPECT_EQ(Vcpus(1001, 8), 2);
  EXPECT_EQ(Vcpus(256000, 8), 8);
  EXPECT_EQ(Vcpus(4000, 0), 1);
}

TEST(QemuCommandTest, MemoryIsRoundedUpToMiBAndRaisedToTheKernelsMinimum) {
  EXPECT_EQ(GuestMemoryMiB(16 << 20), kMinGuestMemoryMiB);
  EXPECT_EQ(GuestMemoryMiB((int64_t{200} << 20) + 1), 201);
}

TEST(QemuCommandTest, QemusDataLimitIsTheGuestsRamPlusItsOwnShare) {
  // + 4 I/O threads' 8 MiB stacks + 64 coroutine stacks of 1 MiB (the root disk's queue).
  constexpr int64_t kIo = 4 * 8 + 64;
  EXPECT_EQ(QemuDataLimitBytes(VmShape{"tcg", 1000, 64 << 20, 4}),
            int64_t{64 + 256 + 16 + kIo} << 20);
  // The guest's RAM raised to 64 MiB; ⌈2500/1000⌉ = 3 vCPUs.
  EXPECT_EQ(QemuDataLimitBytes(VmShape{"tcg", 2500, 16 << 20, 4}),
            int64_t{64 + 256 + 3 * 16 + kIo} << 20);
  EXPECT_EQ(QemuDataLimitBytes(VmShape{"kvm", 256000, int64_t{1} << 30, 2}),
            int64_t{1024 + 256 + 2 * 16 + kIo} << 20);
}

TEST(QemuCommandTest, EveryByteTheGuestRunsIsNamedAndNothingElseIsGiven) {
  absl::StatusOr<std::vector<std::string>> argv = QemuArgv("/usr/bin/qemu", Files(), Shape());
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_EQ(After(*argv, "-bios"), "/store/bios");
  EXPECT_EQ(After(*argv, "-kernel"), "/store/kernel");
  EXPECT_EQ(After(*argv, "-initrd"), "/store/initramfs");
  EXPECT_EQ(After(*argv, "-smp"), "2");
  EXPECT_EQ(After(*argv, "-m"), "100");
  EXPECT_EQ(After(*argv, "-accel"), "tcg,tb-size=12");
  EXPECT_EQ(After(*argv, "-nic"), "none");
  EXPECT_EQ(After(*argv, "-monitor"), "none");
  EXPECT_EQ(After(*argv, "-serial"), "stdio");
  EXPECT_EQ(After(*argv, "-M"), "microvm,x-option-roms=off,acpi=off");
  EXPECT_EQ(After(*argv, "-sandbox"),
            "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
  for (const char* flag : {"-nodefaults", "-no-user-config", "-no-reboot"}) {
    EXPECT_NE(std::find(argv->begin(), argv->end(), flag), argv->end()) << flag;
  }
  for (const std::string& a : *argv) {
    EXPECT_EQ(a.find("netdev"), std::string::npos) << a;
    EXPECT_EQ(a.find("qmp"), std::string::npos) << a;
    EXPECT_EQ(a.find("-daemonize"), std::string::npos) << a;
  }
}

TEST(QemuCommandTest, APathThatIsRelativeOrHoldsACommaIsRefused) {
  VmFiles f = Files();
  f.disk = "/vm/disk.qcow2,file.locking=off";
  EXPECT_TRUE(absl::IsInvalidArgument(QemuArgv("/usr/bin/qemu", f, Shape()).status()));
  f = Files();
  f.kernel = "kernel";
  EXPECT_TRUE(absl::IsInvalidArgument(QemuArgv("/usr/bin/qemu", f, Shape()).status()));
}

TEST(QemuCommandTest, OnlyAConcreteAcceleratorAndAPositiveShapeAreTaken) {
  VmShape s = Shape();
  s.accel = "auto";
  EXPECT_TRUE(absl::IsInvalidArgument(QemuArgv("/usr/bin/qemu", Files(), s).status()));
  s = Shape();
  s.memory_bytes = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(QemuArgv("/usr/bin/qemu", Files(), s).status()));
  s = Shape();
  s.accel = "kvm";
  absl::StatusOr<std::vector<std::string>> argv = QemuArgv("/usr/bin/qemu", Files(), s);
  ASSERT_TRUE(argv.ok());
  EXPECT_EQ(After(*argv, "-accel"), "kvm");
  EXPECT_EQ(After(*argv, "-append"), "console=ttyS0 quiet reboot=t panic=-1 sn.root=/dev/vda");
}

TEST(QemuCommandTest, UnderTcgTheGuestSkipsTheApicTimerThatFailsItsVerificationThere) {
  absl::StatusOr<std::vector<std::string>> argv = QemuArgv("/usr/bin/qemu", Files(), Shape());
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_EQ(After(*argv, "-append"),
            "console=ttyS0 quiet reboot=t panic=-1 sn.root=/dev/vda noapictimer");
  EXPECT_EQ(KernelCommandLine("kvm").find("noapictimer"), std::string::npos);
}

}  // namespace
}  // namespace sn::microvm

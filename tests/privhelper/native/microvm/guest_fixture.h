// What the microVM tests boot: the repository's kernel, guest agent initramfs and qemu seccomp
// policy, the host's microvm firmware, and a busybox root filesystem image made for the test.
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_NATIVE_MICROVM_GUEST_FIXTURE_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_NATIVE_MICROVM_GUEST_FIXTURE_H_

#include <string>

namespace sn::microvm::testing {

inline constexpr char kQemu[] = "/usr/bin/qemu-system-x86_64";
inline constexpr char kFirmware[] = "/usr/share/qemu/bios-microvm.bin";

std::string KernelPath();     // runfiles: tools/microvm/kernel/vmlinux-sandbox-node
std::string InitramfsPath();  // runfiles: tools/microvm/guest_initramfs.cpio
// runfiles: tools/microvm/qemu-seccomp.json, a link: the supervisor reads only a regular file,
// so tests boot with a copy (as a host boots with the staged one).
std::string SeccompPolicyPath();

// Skips (GTEST_SKIP in the caller: returns the reason) unless qemu, mke2fs and busybox are
// here; under CI=true a missing tool is a failure (returns "" after ADD_FAILURE).
std::string MissingTool();

// A 64 MiB ext4 image at `image` of a busybox tree (applets as symlinks, /proc /dev /tmp
// /root /etc, /etc/hostname "sandbox"), built in `scratch`; false on failure.
bool MakeBusyboxImage(const std::string& scratch, const std::string& image);

}  // namespace sn::microvm::testing

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_NATIVE_MICROVM_GUEST_FIXTURE_H_

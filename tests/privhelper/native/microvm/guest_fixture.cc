#include "tests/privhelper/native/microvm/guest_fixture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include "gtest/gtest.h"

namespace sn::microvm::testing {
namespace {

int Run(const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> av;
    for (const std::string& a : argv) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execv(av[0], av.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Runfile(const std::string& p) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/sandbox_node/" + p;
}

}  // namespace

std::string KernelPath() { return Runfile("tools/microvm/kernel/vmlinux-sandbox-node"); }
std::string InitramfsPath() { return Runfile("tools/microvm/guest_initramfs.cpio"); }
std::string SeccompPolicyPath() { return Runfile("tools/microvm/qemu-seccomp.json"); }

std::string MissingTool() {
  for (const char* tool : {kQemu, "/sbin/mke2fs", "/bin/busybox", "/usr/bin/qemu-img", kFirmware}) {
    if (access(tool, R_OK) != 0) {
      const char* ci = std::getenv("CI");
      if (ci != nullptr && std::string(ci) == "true") {
        ADD_FAILURE() << tool << " is missing (CI=true: this test runs or fails)";
        return "";
      }
      return std::string("SKIPPED LOUDLY: ") + tool + " is missing";
    }
  }
  return "";
}

bool MakeBusyboxImage(const std::string& scratch, const std::string& image) {
  const std::string root = scratch + "/rootfs";
  for (const char* d : {"", "/bin", "/proc", "/dev", "/tmp", "/root", "/etc"}) {
    mkdir((root + d).c_str(), 0755);
  }
  if (Run({"/bin/cp", "/bin/busybox", root + "/bin/busybox"}) != 0) return false;
  for (const char* applet : {"sh", "echo", "cat", "uname", "ln", "sleep", "dd", "ls", "true",
                             "sync"}) {
    if (symlink("busybox", (root + "/bin/" + applet).c_str()) != 0) return false;
  }
  std::ofstream(root + "/etc/hostname") << "sandbox\n";
  return Run({"/sbin/mke2fs", "-q", "-F", "-t", "ext4", "-d", root, image, "64M"}) == 0 &&
         chmod(image.c_str(), 0444) == 0;
}

}  // namespace sn::microvm::testing

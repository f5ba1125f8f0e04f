// Landlock as the microVM helper uses it (privhelper/native/landlock.h), as an attacker in the
// helper would try: after RestrictToReading({store, /proc}) a root process (uid 0 owns every
// root file) still reads beneath the store and /proc, and nothing else: not another root-owned
// file, not a write, create or removal even beneath the store. Each case runs in a forked
// child (Landlock cannot be lifted).
#include "privhelper/native/landlock.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace sn::native {
namespace {

class LandlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/landlock";
    std::filesystem::create_directories(root_ + "/store/vms");
    std::filesystem::create_directories(root_ + "/outside");
    std::ofstream(root_ + "/store/vms/record") << "inside";
    std::ofstream(root_ + "/outside/secret") << "outside";
    chmod((root_ + "/outside/secret").c_str(), 0600);
  }

  // errno of open(path, flags) in a child confined to reading the store and /proc (0: opened).
  int OpenConfined(const std::string& path, int flags) {
    int pipefd[2];
    if (pipe(pipefd) != 0) return -1;
    const pid_t pid = fork();
    if (pid == 0) {
      close(pipefd[0]);
      int result = 0;
      const std::string dirs[] = {root_ + "/store", "/proc"};
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || !RestrictToReading(dirs).ok()) {
        result = -2;
      } else {
        const int fd = open(path.c_str(), flags | O_CLOEXEC, 0600);
        result = fd >= 0 ? 0 : errno;
      }
      (void)!write(pipefd[1], &result, sizeof result);
      _exit(0);
    }
    close(pipefd[1]);
    int result = -1;
    if (read(pipefd[0], &result, sizeof result) != sizeof result) result = -1;
    close(pipefd[0]);
    waitpid(pid, nullptr, 0);
    return result;
  }

  std::string root_;
};

TEST_F(LandlockTest, TheConfinedHelperReadsOnlyItsStoreAndProc) {
  EXPECT_EQ(OpenConfined(root_ + "/store/vms/record", O_RDONLY), 0);
  EXPECT_EQ(OpenConfined(root_ + "/store/vms", O_RDONLY | O_DIRECTORY), 0);
  EXPECT_EQ(OpenConfined("/proc/self/stat", O_RDONLY), 0);
  // A file the process's uid owns, outside: refused whatever its permission bits allow.
  EXPECT_EQ(OpenConfined(root_ + "/outside/secret", O_RDONLY), EACCES);
  EXPECT_EQ(OpenConfined("/etc/passwd", O_RDONLY), EACCES);
  // Beneath the store: reading only.
  EXPECT_EQ(OpenConfined(root_ + "/store/vms/record", O_WRONLY), EACCES);
  EXPECT_EQ(OpenConfined(root_ + "/store/vms/new", O_WRONLY | O_CREAT), EACCES);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/store/vms/new"));
}

}  // namespace
}  // namespace sn::native

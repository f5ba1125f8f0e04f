// The installer's host actions (tools/install/system.h): the installer's lock, commands and
// children, and code run with the agent user's credentials.
#include "tools/install/system.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace sn::install {
namespace {

class SystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp ? tmp : "/tmp") + "/system_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
  }
  std::string dir_;
};

TEST_F(SystemTest, ASecondHolderOfTheInstallLockIsUnavailable) {
  const std::string lock = dir_ + "/lock";
  ASSERT_TRUE(TakeInstallLock(lock).ok());
  struct stat st;
  ASSERT_EQ(stat(lock.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::Status second = TakeInstallLock(lock);
  EXPECT_TRUE(absl::IsUnavailable(second)) << second;
}

TEST_F(SystemTest, ALockPathThatIsASymlinkIsRefused) {
  ASSERT_EQ(symlink((dir_ + "/elsewhere").c_str(), (dir_ + "/lock").c_str()), 0);
  EXPECT_FALSE(TakeInstallLock(dir_ + "/lock").ok());
  EXPECT_NE(access((dir_ + "/elsewhere").c_str(), F_OK), 0);  // nothing created through it
}

TEST_F(SystemTest, CommandsReportTheirExitStatusAndAMissingProgram) {
  EXPECT_EQ(*RunCommand({"/bin/true"}), 0);
  EXPECT_EQ(*RunCommand({"/bin/sh", "-c", "exit 7"}), 7);
  EXPECT_TRUE(absl::IsFailedPrecondition(RunCommand({dir_ + "/no-such-program"}).status()));
}

TEST_F(SystemTest, AStoppedChildIsReaped) {
  absl::StatusOr<pid_t> pid = Spawn({"/bin/sleep", "600"}, dir_ + "/sleep.log");
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_TRUE(ChildAlive(*pid));
  StopChild(*pid);
  EXPECT_FALSE(ChildAlive(*pid));
}

TEST_F(SystemTest, RunAsTakesTheUsersCredentialsAndReturnsItsFailure) {
  if (geteuid() != 0) {
    if (std::getenv("CI") && std::string(std::getenv("CI")) == "true") FAIL() << "needs root";
    GTEST_SKIP() << "SKIPPED (not CI): RunAs needs root";
  }
  // TEST_TMPDIR's parents are root's (0700): the other user needs a directory it can reach.
  std::string shared = "/tmp/sn-runas-XXXXXX";
  ASSERT_NE(mkdtemp(shared.data()), nullptr);
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  const std::string file = shared + "/made-by-nobody";
  absl::Status made = RunAs(65534, 65534, [&]() -> absl::Status {
    int fd = open(file.c_str(), O_CREAT | O_WRONLY | O_EXCL, 0600);
    if (fd < 0) return absl::InternalError("open failed");
    close(fd);
    return absl::OkStatus();
  });
  struct stat st;
  const int rc = stat(file.c_str(), &st);
  unlink(file.c_str());
  rmdir(shared.c_str());
  ASSERT_TRUE(made.ok()) << made;
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(st.st_uid, 65534u);
  absl::Status failed =
      RunAs(65534, 65534, [] { return absl::NotFoundError("the child's own reason"); });
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(std::string(failed.message()).find("the child's own reason"), std::string::npos);
}

}  // namespace
}  // namespace sn::install

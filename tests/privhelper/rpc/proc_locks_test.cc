// /proc/locks parsing for the operator's view, and the real file: a flock this process holds
// is found with its pid, without taking any lock.
#include "privhelper/rpc/proc_locks.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace sn::privhelper {
namespace {

TEST(ProcLocksTest, GrantedFlocksAreHoldersWaitersAndOtherLocksAreNot) {
  const LockHolders h = ParseProcLocks(
      "1: FLOCK  ADVISORY  READ  1234 08:01:5678 0 EOF\n"
      "1: -> FLOCK  ADVISORY  WRITE 99 08:01:5678 0 EOF\n"
      "2: POSIX  ADVISORY  WRITE 77 08:01:5678 0 EOF\n"
      "3: FLOCK  ADVISORY  WRITE 55 fd:0a:42 0 EOF\n"
      "garbage line\n"
      "4: FLOCK  ADVISORY  WRITE -1 08:01:x 0 EOF\n");
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h.at({static_cast<uint64_t>(makedev(8, 1)), uint64_t{5678}}), std::vector<pid_t>{1234});
  EXPECT_EQ(h.at({static_cast<uint64_t>(makedev(0xfd, 0x0a)), uint64_t{42}}), std::vector<pid_t>{55});
}

TEST(ProcLocksTest, AFlockThisProcessHoldsIsFoundWithItsPid) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/lease";
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_SH), 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  const LockHolders h = ReadProcLocks();
  auto it = h.find({static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)});
  ASSERT_NE(it, h.end());
  EXPECT_EQ(it->second, std::vector<pid_t>{getpid()});
  close(fd);
}

}  // namespace
}  // namespace sn::privhelper

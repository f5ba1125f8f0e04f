#include "common/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace sn {
namespace {

std::string TempDir() {
  std::string t = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
                  "/af-XXXXXX";
  return mkdtemp(t.data());
}

TEST(AtomicFile, WriteThenReadRoundTripsWithPrivateMode) {
  std::string dir = TempDir();
  std::string p = dir + "/f";
  ASSERT_TRUE(WriteFileAtomically(p, "hello").ok());
  ASSERT_TRUE(WriteFileAtomically(p, "world!").ok());
  auto got = ReadSmallFile(p);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "world!");
  struct stat st;
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(AtomicFile, ReadRefusesOversizedAndMissingFiles) {
  std::string dir = TempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/big", std::string(100, 'x')).ok());
  EXPECT_EQ(ReadSmallFile(dir + "/big", 10).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadSmallFile(dir + "/none").status().code(), absl::StatusCode::kNotFound);
}

TEST(AtomicFile, ReadRefusesSymlinks) {
  std::string dir = TempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/real", "x").ok());
  ASSERT_EQ(symlink((dir + "/real").c_str(), (dir + "/link").c_str()), 0);
  EXPECT_FALSE(ReadSmallFile(dir + "/link").ok());
}

TEST(AtomicFile, MakeDirsCreatesNestedDirectories) {
  std::string dir = TempDir();
  ASSERT_TRUE(MakeDirs(dir + "/a/b/c").ok());
  struct stat st;
  ASSERT_EQ(stat((dir + "/a/b/c").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

// privhelper runs with UMask=0077 under its unit; the microVM store's directories must still
// be exactly 0755 (qemu, as the VM's uid, traverses them), and existing ones are left alone.
TEST(AtomicFile, MakeDirsGivesWhatItCreatesExactlyTheModeWhateverTheUmask) {
  std::string dir = TempDir();
  ASSERT_EQ(chmod(dir.c_str(), 0711), 0);
  const mode_t old = umask(077);
  absl::Status made = MakeDirs(dir + "/x/y", 0755);
  umask(old);
  ASSERT_TRUE(made.ok()) << made;
  struct stat st;
  for (const std::string& p : {dir + "/x", dir + "/x/y"}) {
    ASSERT_EQ(stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0755u) << p;
  }
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u);
}

}  // namespace
}  // namespace sn

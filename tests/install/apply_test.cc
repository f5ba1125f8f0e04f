// Applying the installer's plan step by step (tools/install/apply.h): created once, unchanged
// after, and anything that differs refused by path and kept.
#include "tools/install/apply.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/atomic_file.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace sn::install {
namespace {

class ApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp ? tmp : "/tmp") + "/apply_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
  }

  Step File(const std::string& name, const std::string& contents, int mode = 0640) {
    Step s;
    s.kind = Step::Kind::kFile;
    s.path = dir_ + "/" + name;
    s.contents = contents;
    s.mode = mode;
    s.uid = geteuid();
    s.gid = getegid();
    return s;
  }
  Step Dir(const std::string& name, int mode = 0750) {
    Step s = File(name, "", mode);
    s.kind = Step::Kind::kDir;
    return s;
  }
  // An executable step whose staged copy holds `staged` and whose artifact declares `bytes`.
  Step Binary(const std::string& name, const std::string& bytes, const std::string& staged) {
    Step s = File("bin/" + name, "", 0755);
    s.kind = Step::Kind::kBinary;
    s.artifact = {name, "agent", Sha256Hex(bytes), static_cast<int64_t>(bytes.size())};
    s.source = dir_ + "/staged-" + name;
    EXPECT_TRUE(WriteFileAtomically(s.source, staged, 0600).ok());
    return s;
  }
  static int Mode(const std::string& path) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
  }
  static std::string Read(const std::string& path) {
    absl::StatusOr<std::string> s = ReadSmallFile(path);
    return s.ok() ? *s : "<" + std::string(s.status().message()) + ">";
  }
  void ExpectRefused(const absl::StatusOr<Outcome>& o, const std::string& path,
                     const std::string& what) {
    ASSERT_FALSE(o.ok());
    EXPECT_TRUE(absl::IsFailedPrecondition(o.status())) << o.status();
    const std::string m(o.status().message());
    EXPECT_EQ(m.rfind("refused: " + path, 0), 0u) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  }

  std::string dir_;
};

TEST_F(ApplyTest, MissingStepsAreCreatedOnceAndThenUnchanged) {
  const Step d = Dir("etc");
  const Step f = File("etc/agent.json", "{}\n");
  const Step b = Binary("agent", "ELF bytes", "ELF bytes");
  for (const Step* s : {&d, &f, &b}) {
    absl::StatusOr<Outcome> o = Apply(*s, false);
    ASSERT_TRUE(o.ok()) << s->path << ": " << o.status();
    EXPECT_EQ(*o, Outcome::kCreated) << s->path;
  }
  EXPECT_EQ(Mode(d.path), 0750);
  EXPECT_EQ(Mode(f.path), 0640);
  EXPECT_EQ(Read(f.path), "{}\n");
  EXPECT_EQ(Mode(b.path), 0755);
  EXPECT_EQ(Read(b.path), "ELF bytes");
  for (const Step* s : {&d, &f, &b}) {
    for (bool check_only : {false, true}) {
      absl::StatusOr<Outcome> o = Apply(*s, check_only);
      ASSERT_TRUE(o.ok()) << s->path << ": " << o.status();
      EXPECT_EQ(*o, Outcome::kUnchanged) << s->path;
    }
  }
}

TEST_F(ApplyTest, AFileWithOtherContentsOrModeIsRefusedAndKept) {
  const Step f = File("agent.json", "planned\n");
  ASSERT_TRUE(WriteFileAtomically(f.path, "edited by hand\n", 0640).ok());
  ExpectRefused(Apply(f, false), f.path, "exists with other contents");
  EXPECT_EQ(Read(f.path), "edited by hand\n");
  ASSERT_TRUE(WriteFileAtomically(f.path, "planned\n", 0644).ok());
  ExpectRefused(Apply(f, false), f.path, "mode 0644, not");
  EXPECT_EQ(Mode(f.path), 0644);
}

TEST_F(ApplyTest, ASymlinkWhereAFileOrDirectoryBelongsIsRefusedNotFollowed) {
  const Step f = File("agent.json", "planned\n");
  ASSERT_EQ(symlink((dir_ + "/target").c_str(), f.path.c_str()), 0);
  ExpectRefused(Apply(f, false), f.path, "is not a singly linked regular file");
  const Step d = Dir("state");
  ASSERT_EQ(symlink(dir_.c_str(), d.path.c_str()), 0);
  ExpectRefused(Apply(d, false), d.path, "is not a directory");
  EXPECT_NE(access((dir_ + "/target").c_str(), F_OK), 0);  // nothing written through a link
}

TEST_F(ApplyTest, AnExecutableWithOtherBytesIsRefusedNamingThePinnedArtifact) {
  const Step b = Binary("agent", "pinned bytes", "pinned bytes");
  ASSERT_TRUE(MakeDirs(dir_ + "/bin", 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(b.path, "other bytes!", 0755).ok());
  ExpectRefused(Apply(b, false), b.path, "other bytes than the pinned release's agent");
  EXPECT_EQ(Read(b.path), "other bytes!");
}

TEST_F(ApplyTest, ASecondNameOfTheSameBytesIsAHardLinkToTheFirst) {
  const Step first = Binary("agent", "one executable", "one executable");
  Step second = Binary("privhelper", "one executable", "one executable");
  second.link_to = first.path;
  for (const Step* s : {&first, static_cast<const Step*>(&second)}) {
    absl::StatusOr<Outcome> o = Apply(*s, false);
    ASSERT_TRUE(o.ok()) << s->path << ": " << o.status();
    EXPECT_EQ(*o, Outcome::kCreated) << s->path;
  }
  struct stat a, b;
  ASSERT_EQ(stat(first.path.c_str(), &a), 0);
  ASSERT_EQ(stat(second.path.c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);  // one file: the programs share its pages
  EXPECT_EQ(a.st_nlink, 2u);
  EXPECT_EQ(Mode(second.path), 0755);
  for (bool check_only : {false, true}) {
    absl::StatusOr<Outcome> o = Apply(second, check_only);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(*o, Outcome::kUnchanged);
  }
}

TEST_F(ApplyTest, ALinkToAFileWithOtherBytesIsNeverInstalled) {
  // The first name holds other bytes than the second's artifact declares (edited, or a plan
  // that paired the wrong files): the link is verified before it takes its name.
  const Step first = Binary("agent", "first bytes", "first bytes");
  ASSERT_TRUE(Apply(first, false).ok());
  Step second = Binary("privhelper", "other bytes", "other bytes");
  second.link_to = first.path;
  EXPECT_FALSE(Apply(second, false).ok());
  EXPECT_EQ(Mode(second.path), -1);
  struct stat a;
  ASSERT_EQ(stat(first.path.c_str(), &a), 0);
  EXPECT_EQ(a.st_nlink, 1u);  // no temporary link left behind
}

TEST_F(ApplyTest, AStagedCopyThatDoesNotVerifyIsNeverInstalled) {
  const Step b = Binary("agent", "pinned bytes", "tampered!!!!");
  EXPECT_FALSE(Apply(b, false).ok());
  EXPECT_EQ(Mode(b.path), -1);
  // No temporary is left behind either.
  DIR* d = opendir((dir_ + "/bin").c_str());
  ASSERT_NE(d, nullptr);
  int entries = 0;
  while (dirent* e = readdir(d))
    entries += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
  closedir(d);
  EXPECT_EQ(entries, 0);
}

TEST_F(ApplyTest, AnInstalledHostRefusesAMissingFileButMakesAMissingDirectoryAgain) {
  const Step f = File("agent.json", "planned\n");
  ExpectRefused(Apply(f, true), f.path, "is missing");
  EXPECT_EQ(Mode(f.path), -1);
  const Step d = Dir("run");
  absl::StatusOr<Outcome> o = Apply(d, true);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(*o, Outcome::kCreated);
  EXPECT_EQ(Mode(d.path), 0750);
}

}  // namespace
}  // namespace sn::install

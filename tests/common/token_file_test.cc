// common/token_file.h: what --token-file accepts and every refusal, for a path and for "-".
#include "common/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace sn {
namespace {

constexpr char kToken[] = "0123456789abcdef-token";

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
                    "/tf-XXXXXX";
    ASSERT_NE(mkdtemp(t.data()), nullptr);
    dir_ = t;
  }

  // A file holding `contents` with `mode` (set after creation: the umask does not apply).
  std::string File(const std::string& name, const std::string& contents, mode_t mode = 0600) {
    std::string p = dir_ + "/" + name;
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, contents.data(), contents.size()),
              static_cast<ssize_t>(contents.size()));
    EXPECT_EQ(fchmod(fd, mode), 0);
    close(fd);
    return p;
  }

  // What "-" reads when standard input is a pipe holding `contents`.
  absl::StatusOr<std::string> FromStdin(const std::string& contents) {
    int p[2];
    EXPECT_EQ(pipe(p), 0);
    EXPECT_EQ(write(p[1], contents.data(), contents.size()),
              static_cast<ssize_t>(contents.size()));
    close(p[1]);
    absl::StatusOr<std::string> got = ReadTokenFile("-", geteuid(), p[0]);
    close(p[0]);
    return got;
  }

  static void ExpectRefused(const absl::StatusOr<std::string>& got, const std::string& why) {
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
    EXPECT_NE(got.status().message().find(why), std::string::npos) << got.status();
    EXPECT_EQ(got.status().message().find(kToken), std::string::npos) << got.status();
  }

  std::string dir_;
};

TEST_F(TokenFileTest, AFileOwnedAndReadableByItsOwnerAloneGivesTheTokenWithoutItsNewline) {
  auto got = ReadTokenFile(File("t", std::string(kToken) + "\n"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, kToken);
  got = ReadTokenFile(File("bare", kToken, 0400));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, kToken);
}

TEST_F(TokenFileTest, OnlyOneTrailingNewlineIsStrippedAndNothingElse) {
  auto got = ReadTokenFile(File("t", std::string(kToken) + "\n\n"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string(kToken) + "\n");
  got = ReadTokenFile(File("crlf", std::string(" ") + kToken + "\r\n"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string(" ") + kToken + "\r");
}

TEST_F(TokenFileTest, ASymbolicLinkToAGoodFileIsRefused) {
  std::string target = File("t", kToken);
  std::string link = dir_ + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  ExpectRefused(ReadTokenFile(link), "is a symbolic link");
}

TEST_F(TokenFileTest, AFileReadableByGroupOrOthersIsRefused) {
  ExpectRefused(ReadTokenFile(File("g", kToken, 0640)), "open to group or others (mode 0640)");
  ExpectRefused(ReadTokenFile(File("o", kToken, 0604)), "open to group or others (mode 0604)");
  ExpectRefused(ReadTokenFile(File("gw", kToken, 0620)), "open to group or others (mode 0620)");
}

TEST_F(TokenFileTest, AFileOwnedByAnotherUserIsRefusedAndRootsIsAccepted) {
  std::string p = File("t", kToken);
  struct stat st;
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  if (st.st_uid == 0) {
    // Root's file is accepted whoever reads; another owner needs a chown.
    auto got = ReadTokenFile(p, 4242, STDIN_FILENO);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, kToken);
    if (chown(p.c_str(), 4243, static_cast<gid_t>(-1)) != 0) {
      GTEST_SKIP() << "cannot chown to another uid here (a user namespace?)";
    }
    ExpectRefused(ReadTokenFile(p, 0, STDIN_FILENO), "is owned by uid 4243");
    ExpectRefused(ReadTokenFile(p, 4242, STDIN_FILENO), "is owned by uid 4243");
    return;
  }
  ExpectRefused(ReadTokenFile(p, st.st_uid + 1, STDIN_FILENO),
                "is owned by uid " + std::to_string(st.st_uid));
}

TEST_F(TokenFileTest, MoreThan256BytesAreRefusedAnd256AreAccepted) {
  ExpectRefused(ReadTokenFile(File("big", std::string(257, 'x'))), "more than 256 bytes");
  // The newline counts: 256 bytes of token and a newline are 257 bytes.
  ExpectRefused(ReadTokenFile(File("bignl", std::string(256, 'x') + "\n")),
                "more than 256 bytes");
  ExpectRefused(ReadTokenFile(File("huge", std::string(1 << 20, 'x'))), "more than 256 bytes");
  auto got = ReadTokenFile(File("max", std::string(256, 'x')));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string(256, 'x'));
  got = ReadTokenFile(File("maxnl", std::string(255, 'x') + "\n"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string(255, 'x'));
}

TEST_F(TokenFileTest, AnEmptyFileOrALoneNewlineIsRefused) {
  ExpectRefused(ReadTokenFile(File("empty", "")), "holds no token");
  ExpectRefused(ReadTokenFile(File("nl", "\n")), "holds no token");
}

TEST_F(TokenFileTest, AMissingFileADirectoryAndAFifoAreRefused) {
  ExpectRefused(ReadTokenFile(dir_ + "/none"), "cannot be opened");
  std::string d = dir_ + "/d";
  ASSERT_EQ(mkdir(d.c_str(), 0700), 0);
  ExpectRefused(ReadTokenFile(d), "not a regular file");
  // A FIFO with no writer: O_NONBLOCK keeps the open from blocking, and it is refused.
  std::string f = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(f.c_str(), 0600), 0);
  ExpectRefused(ReadTokenFile(f), "not a regular file");
  ExpectRefused(ReadTokenFile(""), "not named");
}

TEST_F(TokenFileTest, StandardInputGivesTheTokenWithoutItsNewline) {
  auto got = FromStdin(std::string(kToken) + "\n");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, kToken);
  got = FromStdin(kToken);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, kToken);
}

TEST_F(TokenFileTest, StandardInputIsRefusedWhenEmptyOrLongerThan256Bytes) {
  ExpectRefused(FromStdin(""), "standard input holds no token");
  ExpectRefused(FromStdin("\n"), "standard input holds no token");
  ExpectRefused(FromStdin(std::string(257, 'x')), "standard input holds more than 256 bytes");
  // A writer that keeps writing is not read to its end: 257 bytes decide.
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::string lots(4096, 'x');
  ASSERT_EQ(write(p[1], lots.data(), lots.size()), static_cast<ssize_t>(lots.size()));
  ExpectRefused(ReadTokenFile("-", geteuid(), p[0]), "more than 256 bytes");
  close(p[0]);
  close(p[1]);
}

TEST_F(TokenFileTest, StandardInputMayBeARedirectedFileOfAnyMode) {
  // "-" checks nothing about what stdin is: the shell that opened it decided.
  std::string p = File("shared", std::string(kToken) + "\n", 0644);
  int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto got = ReadTokenFile("-", geteuid(), fd);
  close(fd);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, kToken);
}

}  // namespace
}  // namespace sn

// The `release` binary (//tools/release): keygen's output and refusal to overwrite, publish's
// exit statuses (0 done, 1 refused, 2 usage), run as an operator runs it.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "common/json/base64.h"
#include "common/release/ed25519.h"
#include "common/release/verify.h"
#include "gtest/gtest.h"
#include "tests/release/fixture.h"

extern char** environ;

namespace sn::release::testing {
namespace {

struct Ran {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) { return ReadSmallFile(path).value_or(""); }

// Runs tools/release/release (from the test's runfiles) with `args`.
Ran RunRelease(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {"tools/release/release"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  Ran r;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0);
  if (rc != 0) return r;
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

class ReleaseCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    key_ = dir_ + "/release.key";
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/python.tar", "image bytes", 0644).ok());
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/helper", "helper bytes", 0755).ok());
  }
  std::string dir_;
  std::string key_;
};

TEST_F(ReleaseCliTest, KeygenWritesAPrivateKeyAndPrintsItsPublicHalfOnce) {
  Ran r = RunRelease(dir_, {"keygen", "--private-key=" + key_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.size(), 45u) << r.out;  // 44 base64 characters and a newline
  EXPECT_EQ(r.out.back(), '\n');
  absl::StatusOr<PublicKey> pub = PublicKey::FromBase64(r.out.substr(0, 44));
  ASSERT_TRUE(pub.ok()) << pub.status();
  struct stat st;
  ASSERT_EQ(stat(key_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  const std::string pem = Slurp(key_);
  Ran again = RunRelease(dir_, {"keygen", "--private-key=" + key_});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("never overwrites"), std::string::npos) << again.err;
  EXPECT_EQ(Slurp(key_), pem);
  // No temporary file is left beside the key.
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    names.insert(e.path().filename().string());
  }
  EXPECT_EQ(names, (std::set<std::string>{"release.key", "python.tar", "helper", "stdout",
                                          "stderr"}));
}

TEST_F(ReleaseCliTest, PublishExitsZeroThenOneOnAConflictAndTwoOnUsage) {
  Ran k = RunRelease(dir_, {"keygen", "--private-key=" + key_});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  const std::string releases = dir_ + "/releases";
  Ran p = RunRelease(dir_, {"publish", "--releases-dir=" + releases, "--source=2026.11.1",
                            "--private-key=" + key_, "--make-current",
                            "image=" + dir_ + "/python.tar", "helper=" + dir_ + "/helper"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("published release 2026.11.1 (2 artifacts)"), std::string::npos);
  EXPECT_EQ(Slurp(releases + "/current"), "2026.11.1\n");
  const std::string rel = releases + "/2026.11.1/";
  absl::StatusOr<PublicKey> pub = PublicKey::FromBase64(k.out.substr(0, 44));
  ASSERT_TRUE(pub.ok());
  EXPECT_TRUE(VerifyRelease("2026.11.1", Slurp(rel + "manifest.json"),
                            Slurp(rel + "manifest.json.sig"), Slurp(rel + "SHA256SUMS"), *pub)
                  .ok());

  ASSERT_TRUE(WriteFileAtomically(dir_ + "/kernel", "k", 0644).ok());
  Ran conflict = RunRelease(dir_, {"publish", "--releases-dir=" + releases,
                                   "--source=2026.11.1", "--private-key=" + key_,
                                   "kernel=" + dir_ + "/kernel"});
  EXPECT_EQ(conflict.exit_code, 1) << conflict.err;
  EXPECT_NE(access((rel + "kernel").c_str(), F_OK), 0);

  EXPECT_EQ(RunRelease(dir_, {"publish", "--releases-dir=" + releases, "--source=current",
                              "--private-key=" + key_, "image=" + dir_ + "/python.tar"})
                .exit_code,
            2);
  EXPECT_EQ(RunRelease(dir_, {"publish", "--releases-dir=" + releases, "--source=x",
                              "--private-key=" + key_, "bogus=" + dir_ + "/python.tar"})
                .exit_code,
            2);
  EXPECT_EQ(RunRelease(dir_, {"publish", "--source=x"}).exit_code, 2);
  EXPECT_EQ(RunRelease(dir_, {"frobnicate"}).exit_code, 2);

  // A private key others can read is refused.
  ASSERT_EQ(chmod(key_.c_str(), 0644), 0);
  Ran loose = RunRelease(dir_, {"publish", "--releases-dir=" + releases, "--source=2026.11.1",
                                "--private-key=" + key_});
  EXPECT_EQ(loose.exit_code, 1);
  EXPECT_NE(loose.err.find("chmod 600"), std::string::npos) << loose.err;
}

}  // namespace
}  // namespace sn::release::testing

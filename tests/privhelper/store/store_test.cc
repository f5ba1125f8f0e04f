// privhelper's own state (privhelper/store): the directory and record rules of durable.h, the
// installation identity, and the generation store, on the real filesystem. The attacks are
// what a local user or a confused operator can do to the state directory: symlinks, foreign
// owners, loose modes, extra links, a replaced record.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/state_dir.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper::store {
namespace {

using sn::testing::ShortTempDir;

constexpr char kInstallation[] = "0000aaaa-0000-4000-8000-0000000000aa";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void Put(const std::string& path, const std::string& text, mode_t mode = 0600) {
  { std::ofstream(path) << text; }
  chmod(path.c_str(), mode);
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { state_path_ = tmp_.File("state"); }
  absl::StatusOr<Dir> State() { return OpenStateDir(fs_, state_path_, geteuid()); }

  ShortTempDir tmp_;
  std::string state_path_;
  PosixFs& fs_ = *PosixFs::Get();
};

TEST_F(StoreTest, StateDirIsCreatedPrivateAndReopened) {
  ASSERT_TRUE(State().ok());
  struct stat st {};
  ASSERT_EQ(lstat(state_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_TRUE(State().ok());
}

TEST_F(StoreTest, SymlinkedStateDirIsRefused) {
  const std::string real = tmp_.File("real");
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(symlink(real.c_str(), state_path_.c_str()), 0);
  EXPECT_EQ(State().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, StateDirWithLooseModeIsRefusedNotRepaired) {
  ASSERT_EQ(mkdir(state_path_.c_str(), 0755), 0);
  chmod(state_path_.c_str(), 0755);
  absl::StatusOr<Dir> d = State();
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("0700"), std::string_view::npos) << d.status();
  struct stat st {};
  ASSERT_EQ(stat(state_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);  // left as found
}

TEST_F(StoreTest, StateDirOfAnotherOwnerIsRefused) {
  SN_REQUIRE_ROOT();
  ASSERT_EQ(mkdir(state_path_.c_str(), 0700), 0);
  ASSERT_EQ(chown(state_path_.c_str(), 65534, 65534), 0);
  EXPECT_EQ(State().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, StateDirUnderAnAgentWritableAncestorIsRefused) {
  SN_REQUIRE_ROOT();
  const std::string parent = tmp_.File("writable");
  ASSERT_EQ(mkdir(parent.c_str(), 0777), 0);
  chmod(parent.c_str(), 0777);  // not sticky: anyone may rename our directory away
  absl::StatusOr<Dir> d = OpenStateDir(fs_, parent + "/state", geteuid());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition) << d.status();
  struct stat st {};
  EXPECT_NE(stat((parent + "/state").c_str(), &st), 0);  // nothing was created
}

TEST_F(StoreTest, InstallationIsCreatedOnceAndKept) {
  absl::StatusOr<Dir> state = State();
  ASSERT_TRUE(state.ok());
  absl::StatusOr<std::string> first = LoadOrCreateInstallationId(fs_, *state, geteuid());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)[14], '4');  // uuid v4
  struct stat st {};
  ASSERT_EQ(stat((state_path_ + "/installation.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  absl::StatusOr<std::string> again = LoadOrCreateInstallationId(fs_, *state, geteuid());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
}

TEST_F(StoreTest, PublishOnceNeverReplacesAnExistingRecord) {
  absl::StatusOr<Dir> state = State();
  ASSERT_TRUE(state.ok());
  ASSERT_TRUE(PublishOnce(fs_, *state, "r", "first").ok());
  EXPECT_EQ(PublishOnce(fs_, *state, "r", "second").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Slurp(state_path_ + "/r"), "first");
  // No temporary is left behind by the refused publication.
  absl::StatusOr<std::vector<std::string>> names = fs_.ListDir(*state);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 1u);
}

TEST_F(StoreTest, TornForeignLinkedOrSymlinkedIdentityIsRefusedAndKept) {
  absl::StatusOr<Dir> state = State();
  ASSERT_TRUE(state.ok());
  const std::string path = state_path_ + "/installation.json";
  Put(path, "{\"schema\":1,\"installation_");
  EXPECT_EQ(LoadOrCreateInstallationId(fs_, *state, geteuid()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Slurp(path), "{\"schema\":1,\"installation_");

  const std::string good = std::string("{\"schema\":1,\"installation_id\":\"") + kInstallation + "\"}";
  Put(path, good, 0644);  // readable by others
  EXPECT_FALSE(LoadOrCreateInstallationId(fs_, *state, geteuid()).ok());
  chmod(path.c_str(), 0600);
  EXPECT_TRUE(LoadOrCreateInstallationId(fs_, *state, geteuid()).ok());
  ASSERT_EQ(link(path.c_str(), tmp_.File("second-link").c_str()), 0);  // multiply linked
  EXPECT_FALSE(LoadOrCreateInstallationId(fs_, *state, geteuid()).ok());
  unlink(tmp_.File("second-link").c_str());
  unlink(path.c_str());
  Put(tmp_.File("elsewhere.json"), good);
  ASSERT_EQ(symlink(tmp_.File("elsewhere.json").c_str(), path.c_str()), 0);
  EXPECT_FALSE(LoadOrCreateInstallationId(fs_, *state, geteuid()).ok());  // never followed
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));  // and never replaced
}

TEST_F(StoreTest, UppercaseIdentityIsRefused) {
  absl::StatusOr<Dir> state = State();
  ASSERT_TRUE(state.ok());
  Put(state_path_ + "/installation.json",
      "{\"schema\":1,\"installation_id\":\"0000AAAA-0000-4000-8000-0000000000FF\"}");
  EXPECT_FALSE(LoadOrCreateInstallationId(fs_, *state, geteuid()).ok());
}

}  // namespace
}  // namespace sn::privhelper::store

// The node's durable files: identity, credential, installation id, owner epoch.
#include "agent/state/state_files.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "common/atomic_file.h"
#include "gtest/gtest.h"

namespace sn::agent {
namespace {

class StateFilesTest : public ::testing::Test {
 protected:
  StateFilesTest() {
    char tmpl[] = "/tmp/agent-sf-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~StateFilesTest() override { if (system(("rm -rf " + dir_).c_str()) != 0) {} }
  std::string dir_;
};

TEST_F(StateFilesTest, IdentityRoundTrips) {
  StateFiles f(dir_);
  ASSERT_TRUE(f.EnsureDirs().ok());
  NodeIdentity id{"11111111-1111-4111-8111-111111111111",
                  "22222222-2222-4222-8222-222222222222",
                  "docker",
                  7,
                  std::string(64, 'a'),
                  "dev-1",
                  "https://core.example"};
  ASSERT_TRUE(f.WriteIdentity(id).ok());
  absl::StatusOr<NodeIdentity> back = f.ReadIdentity();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, id);
}

TEST_F(StateFilesTest, TornIdentityIsDataLoss) {
  StateFiles f(dir_);
  ASSERT_TRUE(f.EnsureDirs().ok());
  ASSERT_TRUE(WriteFileAtomically(f.IdentityPath(), "{\"node_id\":").ok());
  EXPECT_TRUE(absl::IsDataLoss(f.ReadIdentity().status()));
}

TEST_F(StateFilesTest, CredentialIsPrivate) {
  StateFiles f(dir_);
  ASSERT_TRUE(f.EnsureDirs().ok());
  ASSERT_TRUE(f.WriteCredential("secret").ok());
  struct stat st;
  ASSERT_EQ(stat(f.CredentialPath().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(*f.ReadCredential(), "secret");
  chmod(f.CredentialPath().c_str(), 0644);
  EXPECT_TRUE(absl::IsFailedPrecondition(f.ReadCredential().status()));
}

TEST_F(StateFilesTest, EpochStoreStartsAtZeroAndPersists) {
  StateFiles f(dir_);
  ASSERT_TRUE(f.EnsureDirs().ok());
  FileEpochStore s(f.OwnerEpochPath());
  EXPECT_EQ(*s.Load(), 0);
  ASSERT_TRUE(s.Store(41).ok());
  EXPECT_EQ(*FileEpochStore(f.OwnerEpochPath()).Load(), 41);
  EXPECT_EQ(*ReadSmallFile(f.OwnerEpochPath()), "41\n");
}

TEST_F(StateFilesTest, ForeignEpochFileIsDataLoss) {
  StateFiles f(dir_);
  ASSERT_TRUE(f.EnsureDirs().ok());
  for (const char* bad : {"", "abc\n", "-3\n", "007\n", "0\n"}) {
    ASSERT_TRUE(WriteFileAtomically(f.OwnerEpochPath(), bad).ok());
    EXPECT_TRUE(absl::IsDataLoss(FileEpochStore(f.OwnerEpochPath()).Load().status())) << bad;
  }
}

}  // namespace
}  // namespace sn::agent

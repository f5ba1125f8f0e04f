// devcore's durable state (tools/devcore/node_store.h): what survives a restart, single-use
// tokens, hashed secrets, torn files.
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "tests/devcore/fixture.h"
#include "tools/devcore/crypto.h"
#include "tools/devcore/node_store.h"

namespace sn::devcore::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

NodeRecord Record(const std::string& installation) {
  NodeRecord r;
  r.installation_id = installation;
  r.provider = "docker";
  r.backend_fingerprint = "docker/24";
  r.deployment_generation = 3;
  r.specification_digest = kDigest;
  r.max_active = 2;
  r.max_retained = 5;
  return r;
}

TEST(NodeStoreTest, NodesTokensAndEpochsSurviveARestart) {
  const std::string dir = MakeTempDir();
  std::string node_id, credential, unused_token;
  {
    auto store = NodeStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    auto token = (*store)->IssueEnrollmentToken();
    auto unused = (*store)->IssueEnrollmentToken();
    ASSERT_TRUE(token.ok() && unused.ok());
    unused_token = *unused;
    auto enrolled = (*store)->Enroll(*token, Record(kInstallation));
    ASSERT_TRUE(enrolled.ok()) << enrolled.status();
    node_id = enrolled->node_id;
    credential = enrolled->credential;
    ASSERT_TRUE((*store)->BumpOwnerEpoch(node_id).ok());
    ASSERT_EQ(*(*store)->BumpOwnerEpoch(node_id), 3);
  }
  auto store = NodeStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  const NodeRecord* r = (*store)->Find(node_id);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->owner_epoch, 3);
  EXPECT_EQ(r->installation_id, kInstallation);
  EXPECT_EQ(r->deployment_generation, 3);
  EXPECT_EQ(r->max_retained, 5);
  EXPECT_TRUE((*store)->CredentialMatches(node_id, credential));
  EXPECT_FALSE((*store)->CredentialMatches(node_id, credential + "0"));
  // The unused token still works once after the restart.
  EXPECT_TRUE((*store)->Enroll(unused_token, Record("11111111-2222-4333-8444-555555555555")).ok());
}

TEST(NodeStoreTest, TokensAreSingleUseAcrossRestarts) {
  const std::string dir = MakeTempDir();
  std::string token;
  {
    auto store = NodeStore::Open(dir);
    ASSERT_TRUE(store.ok());
    token = *(*store)->IssueEnrollmentToken();
    ASSERT_TRUE((*store)->Enroll(token, Record(kInstallation)).ok());
    EXPECT_TRUE(absl::IsUnauthenticated(
        (*store)->Enroll(token, Record("11111111-2222-4333-8444-555555555555")).status()));
  }
  auto store = NodeStore::Open(dir);
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(
      (*store)->Enroll(token, Record("11111111-2222-4333-8444-555555555555")).status()));
}

TEST(NodeStoreTest, AnEnrolledInstallationCannotEnrollAgainAndKeepsTheToken) {
  const std::string dir = MakeTempDir();
  auto store = NodeStore::Open(dir);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Enroll(*(*store)->IssueEnrollmentToken(), Record(kInstallation)).ok());
  const std::string token = *(*store)->IssueEnrollmentToken();
  EXPECT_TRUE(absl::IsAlreadyExists((*store)->Enroll(token, Record(kInstallation)).status()));
  // The refused enrollment did not consume the token.
  EXPECT_TRUE((*store)->Enroll(token, Record("11111111-2222-4333-8444-555555555555")).ok());
}

TEST(NodeStoreTest, StateFileHoldsOnlyHashesOfSecretsAndIsPrivate) {
  const std::string dir = MakeTempDir();
  auto store = NodeStore::Open(dir);
  ASSERT_TRUE(store.ok());
  const std::string pending = *(*store)->IssueEnrollmentToken();
  auto enrolled = (*store)->Enroll(*(*store)->IssueEnrollmentToken(), Record(kInstallation));
  ASSERT_TRUE(enrolled.ok());
  const std::string path = dir + "/devcore-state.json";
  const std::string text = ReadAll(path);
  EXPECT_EQ(text.find(enrolled->credential), std::string::npos);
  EXPECT_EQ(text.find(pending), std::string::npos);
  EXPECT_NE(text.find(Sha256Hex(enrolled->credential)), std::string::npos);
  EXPECT_NE(text.find(Sha256Hex(pending)), std::string::npos);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(NodeStoreTest, RevokedCredentialNoLongerMatchesAfterARestart) {
  const std::string dir = MakeTempDir();
  std::string node_id, credential;
  {
    auto store = NodeStore::Open(dir);
    ASSERT_TRUE(store.ok());
    auto e = (*store)->Enroll(*(*store)->IssueEnrollmentToken(), Record(kInstallation));
    ASSERT_TRUE(e.ok());
    node_id = e->node_id;
    credential = e->credential;
    EXPECT_EQ((*store)->FindByCredential(credential), (*store)->Find(node_id));
    ASSERT_TRUE((*store)->RevokeCredential(node_id).ok());
  }
  auto store = NodeStore::Open(dir);
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE((*store)->CredentialMatches(node_id, credential));
  EXPECT_EQ((*store)->FindByCredential(credential), nullptr);
}

TEST(NodeStoreTest, TornStateFileIsReportedNotIgnored) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/devcore-state.json", "{\"schema\":1,\"nodes\":[").ok());
  auto store = NodeStore::Open(dir);
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
}

TEST(NodeStoreTest, ForeignStateFileIsReported) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/devcore-state.json",
                                  "{\"schema\":1,\"enrollment_token_sha256\":[],"
                                  "\"nodes\":[{\"node_id\":7}]}")
                  .ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(NodeStore::Open(dir).status()));
}

}  // namespace
}  // namespace sn::devcore::testing

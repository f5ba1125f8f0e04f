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

TEST(NodeStoreTest, DeploymentAnnouncementsAndDropsSurviveARestart) {
  const std::string dir = MakeTempDir();
  std::string node_id;
  {
    auto store = NodeStore::Open(dir);
    ASSERT_TRUE(store.ok());
    auto token = (*store)->IssueEnrollmentToken();
    NodeRecord rec = Record(kInstallation);
    rec.generation_management = true;
    auto enrolled = (*store)->Enroll(*token, rec);
    ASSERT_TRUE(enrolled.ok());
    node_id = enrolled->node_id;
    ASSERT_TRUE((*store)->SetDeployment(node_id, {5, 4}).ok());
    ASSERT_TRUE((*store)->RecordAnnounced(node_id, {5, 4}).ok());
    ASSERT_TRUE((*store)->RecordAnnounced(node_id, {3}).ok());
    ASSERT_TRUE((*store)->RecordDrop(node_id, {3, kDigest}).ok());
    ASSERT_TRUE((*store)->RecordDrop(node_id, {2, kOtherDigest}).ok());
    ASSERT_TRUE((*store)->RecordDrop(node_id, {3, kDigest}).ok());  // again: no change
    EXPECT_EQ((*store)->SetDeployment("00000000-0000-4000-8000-000000000000", {1, {}}).code(),
              absl::StatusCode::kNotFound);
  }
  auto store = NodeStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  const NodeRecord* r = (*store)->Find(node_id);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(r->deployment.has_value());
  EXPECT_EQ(r->deployment->generation, 5);
  EXPECT_EQ(r->deployment->serving_generation, 4);
  EXPECT_EQ(r->announced_generations, (std::vector<int64_t>{3, 4, 5}));
  ASSERT_EQ(r->dropped.size(), 2u);
  EXPECT_EQ(r->dropped[0], (GenerationRef{2, kOtherDigest}));
  EXPECT_EQ(r->dropped[1], (GenerationRef{3, kDigest}));
  // A null serving generation is kept as null.
  ASSERT_TRUE((*store)->SetDeployment(node_id, {6, std::nullopt}).ok());
  auto reopened = NodeStore::Open(dir);
  ASSERT_TRUE(reopened.ok());
  EXPECT_FALSE((*reopened)->Find(node_id)->deployment->serving_generation.has_value());
}

TEST(NodeStoreTest, ASchemaOneStateFileLoadsWithoutGenerationFacts) {
  const std::string dir = MakeTempDir();
  const std::string v1 =
      R"({"schema":1,"enrollment_token_sha256":[],"nodes":[{"node_id":"00000000-0000-4000-8000-000000000001",)"
      R"("installation_id":"6f1c3a52-8d7e-4b1a-9c2d-3e4f5a6b7c8d","provider":"docker",)"
      R"("backend_fingerprint":"fp","deployment_generation":1,"specification_digest":")" +
      kDigest +
      R"(","generation_management":true,"max_active":1,"max_retained":0,)"
      R"("credential_sha256":"","owner_epoch":2}]})";
  ASSERT_TRUE(WriteFileAtomically(dir + "/devcore-state.json", v1).ok());
  auto store = NodeStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  const NodeRecord* r = (*store)->Find("00000000-0000-4000-8000-000000000001");
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->deployment.has_value());
  EXPECT_TRUE(r->announced_generations.empty());
  EXPECT_TRUE(r->dropped.empty());
  // The next change writes schema 2.
  ASSERT_TRUE((*store)->RecordDrop(r->node_id, {1, kDigest}).ok());
  EXPECT_NE(ReadAll(dir + "/devcore-state.json").find("\"schema\": 2"), std::string::npos);
}

TEST(NodeStoreTest, MalformedGenerationFactsAreATornStateFile) {
  const std::string dir = MakeTempDir();
  {
    auto store = NodeStore::Open(dir);
    auto token = (*store)->IssueEnrollmentToken();
    ASSERT_TRUE((*store)->Enroll(*token, Record(kInstallation)).ok());
  }
  const std::string good = ReadAll(dir + "/devcore-state.json");
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"dropped\": []", "\"dropped\": [{\"generation\": 1}]"},
           {"\"dropped\": []", "\"dropped\": [{\"generation\": 1, \"specification_digest\": \"AB\"}]"},
           {"\"announced_generations\": []", "\"announced_generations\": [2, 1]"},
           {"\"announced_generations\": []", "\"announced_generations\": [0]"},
           {"\"deployment\": null", "\"deployment\": {\"generation\": 1}"},
           {"\"deployment\": null", "\"deployment\": {\"generation\": 0, \"serving_generation\": null}"},
           {"\"deployment\": null,", ""}}) {
    std::string text = good;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    ASSERT_TRUE(WriteFileAtomically(dir + "/devcore-state.json", text).ok());
    auto store = NodeStore::Open(dir);
    EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << to;
  }
}

}  // namespace
}  // namespace sn::devcore::testing

// devcore's generation admin API (issues 9 and 10): generations checked against their
// release, deployments announced in welcome and heartbeat_ack, drops, and the retention
// answers they produce; all durable across a restart.
#include <string>
#include <variant>

#include "common/atomic_file.h"
#include "common/wire/codec.h"
#include "common/wire/limits.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/devcore/fixture.h"
#include "tests/release/fixture.h"
#include "tools/devcore/deployment.h"
#include "tools/release/publisher.h"

namespace sn::devcore::testing {
namespace {

using json = nlohmann::json;

class GenerationsTest : public DevcoreTest {
 protected:
  void SetUp() override {
    generation_management_ = true;
    const std::string root = MakeTempDir();
    releases_dir_ = root + "/releases";
    // Releases dev-1 (generations 1..3's images) and dev-2 (generation 4's).
    Publish("dev-1", {1, 2, 3});
    Publish("dev-2", {4});
    DevcoreTest::SetUp();
  }

  void Publish(const std::string& source, std::vector<int64_t> generations) {
    const std::string in = MakeTempDir();
    release_tool::PublishRequest r;
    r.releases_dir = releases_dir_;
    r.source = source;
    for (int64_t g : generations) {
      const std::string path = in + "/image-" + std::to_string(g) + ".tar";
      ASSERT_TRUE(WriteFileAtomically(path, ImageBytes(g), 0644).ok());
      r.artifacts.push_back({"image", path});
    }
    ASSERT_TRUE(release_tool::Publish(r, key_, clock_).ok());
  }

  HttpResponse PostGeneration(const std::string& bytes) {
    return Call("POST", "/admin/v1/generations", bytes);
  }
  HttpResponse PutDeployment(const std::string& body, const std::string& node = "") {
    return Call("PUT", "/admin/v1/nodes/" + (node.empty() ? node_id_ : node) + "/deployment",
                body);
  }
  HttpResponse Drop(int64_t g, const std::string& digest, const std::string& node = "") {
    return Call("POST", "/admin/v1/nodes/" + (node.empty() ? node_id_ : node) + "/drops",
                json{{"generation", g}, {"specification_digest", digest}}.dump());
  }
  json NodeView() {
    const json all = json::parse(Call("GET", "/admin/v1/nodes").body);
    for (const json& n : all["nodes"]) {
      if (n["node_id"] == node_id_) return n;
    }
    ADD_FAILURE() << "node not listed";
    return json();
  }

  // Connects the node and returns the welcome's deployment.
  std::optional<wire::Deployment> Connect() {
    conn_.reset();
    sequence_ = 0;
    t_ = std::make_unique<FakeTransport>();
    conn_ = Open(t_.get());
    return Hello(conn_->session(), *t_).deployment;
  }
  std::optional<wire::Deployment> HeartbeatAck() {
    conn_->session().OnMessage(wire::Encode(MakeHeartbeat(conn_->session())), true);
    const wire::Frame f = t_->LastFrame();
    const auto* ack = std::get_if<wire::HeartbeatAck>(&f);
    EXPECT_NE(ack, nullptr);
    return ack != nullptr ? ack->deployment : std::nullopt;
  }
  // One retention exchange on the live connection; returns the keeps in order.
  std::vector<bool> Retention(const std::vector<GenerationRef>& pairs) {
    wire::Retention r;
    r.id = *NewUuid();
    r.sequence = ++sequence_;
    r.connection_id = conn_->session().connection_id();
    r.owner_epoch = conn_->session().owner_epoch();
    for (const GenerationRef& p : pairs) {
      r.entries.push_back({p.generation, p.specification_digest, std::nullopt});
    }
    conn_->session().OnMessage(wire::Encode(r), true);
    const wire::Frame f = t_->LastFrame();
    const auto* ack = std::get_if<wire::RetentionAck>(&f);
    std::vector<bool> keeps;
    EXPECT_NE(ack, nullptr);
    if (ack == nullptr) return keeps;
    EXPECT_EQ(ack->id, r.id);
    EXPECT_EQ(ack->sequence, r.sequence);
    EXPECT_EQ(ack->connection_id, r.connection_id);
    EXPECT_EQ(ack->owner_epoch, r.owner_epoch);
    EXPECT_EQ(ack->entries.size(), r.entries.size());
    for (size_t i = 0; i < ack->entries.size() && i < r.entries.size(); ++i) {
      EXPECT_EQ(ack->entries[i].generation, r.entries[i].generation);
      EXPECT_EQ(ack->entries[i].specification_digest, r.entries[i].specification_digest);
      keeps.push_back(ack->entries[i].keep.value_or(true));
    }
    return keeps;
  }
  std::string Digest(int64_t g, const std::string& source = "dev-1") {
    return Sha256Hex(SpecBytes(g, source));
  }

  release::PrivateKey key_ = release::testing::NewKey();
  std::unique_ptr<FakeTransport> t_;
  std::unique_ptr<Connection> conn_;
  int64_t sequence_ = 0;
};

TEST_F(GenerationsTest, PostingAGenerationAnswers201ThenTheSameAnswerWith200) {
  HttpResponse r = PostGeneration(SpecBytes(2));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(json::parse(r.body), (json{{"generation", 2}, {"specification_digest", Digest(2)}}));
  HttpResponse again = PostGeneration(SpecBytes(2));
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body, r.body);
  json list = json::parse(Call("GET", "/admin/v1/generations").body)["generations"];
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1]["generation"], 2);
  EXPECT_EQ(list[1]["runtime_source"], "dev-1");
  // Kept byte-exact, and still held after a restart.
  EXPECT_EQ(*ReadSmallFile(dir_ + "/specifications/2.json"), SpecBytes(2));
  Restart();
  EXPECT_EQ(PostGeneration(SpecBytes(2)).status, 200);
}

TEST_F(GenerationsTest, AGenerationWithOtherBytesAnswers409) {
  ASSERT_EQ(PostGeneration(SpecBytes(2)).status, 201);
  // Same generation, equal meaning, other bytes: still another document.
  EXPECT_EQ(PostGeneration(SpecBytes(2) + " ").status, 409);
  EXPECT_EQ(PostGeneration(SpecBytes(1, "dev-2")).status, 409);  // the enrolled one, altered
}

TEST_F(GenerationsTest, ADocumentThatFailsSection6OrItsReleaseAnswers400) {
  EXPECT_EQ(PostGeneration("{}").status, 400);
  EXPECT_EQ(PostGeneration(SpecBytes(2).substr(1)).status, 400);
  // Release dev-2 does not have generation 2's image.
  HttpResponse missing = PostGeneration(SpecBytes(2, "dev-2"));
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("does not have"), std::string::npos) << missing.body;
  // A release devcore does not serve.
  EXPECT_EQ(PostGeneration(SpecBytes(2, "dev-9")).status, 400);
  // The artifact exists but with another size and digest.
  wire::SpecificationDocument d = *wire::DecodeSpecificationDocument(SpecBytes(3));
  d.artifacts[0].size += 1;
  EXPECT_EQ(PostGeneration(wire::EncodeSpecificationDocument(d)).status, 400);
  EXPECT_EQ(PostGeneration(SpecBytes(4, "dev-2")).status, 201);
  EXPECT_EQ(Call("DELETE", "/admin/v1/generations").status, 405);
}

TEST_F(GenerationsTest, DeploymentIsDurableAndAnnouncedInTheNextAckAndEveryWelcome) {
  ASSERT_EQ(PostGeneration(SpecBytes(2)).status, 201);
  std::optional<wire::Deployment> welcome = Connect();
  ASSERT_TRUE(welcome.has_value());
  EXPECT_EQ(welcome->generation, 1);  // no --specification: the enrolled generation
  EXPECT_FALSE(welcome->serving_generation.has_value());
  // Not announced yet: the configuration route refuses generation 2.
  EXPECT_EQ(Call("GET", "/api/v1/sandbox-node/configuration?generation=2", "",
                 "Bearer " + credential_)
                .status,
            404);
  HttpResponse put = PutDeployment(R"({"generation":2,"serving_generation":1})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(json::parse(put.body),
            (json{{"generation", 2}, {"specification_digest", Digest(2)},
                  {"serving_generation", 1}}));
  std::optional<wire::Deployment> ack = HeartbeatAck();
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->generation, 2);
  EXPECT_EQ(ack->specification_digest, Digest(2));
  EXPECT_EQ(ack->serving_generation, 1);
  HttpResponse config = Call("GET", "/api/v1/sandbox-node/configuration?generation=2", "",
                             "Bearer " + credential_);
  EXPECT_EQ(config.status, 200);
  EXPECT_EQ(config.body, SpecBytes(2));
  json n = NodeView();
  EXPECT_EQ(n["deployment"]["generation"], 2);
  EXPECT_EQ(n["deployment"]["serving_generation"], 1);
  EXPECT_EQ(n["announced_generations"], (json{1, 2}));
  // After a restart the deployment is what the welcome announces.
  conn_.reset();
  Restart();
  welcome = Connect();
  ASSERT_TRUE(welcome.has_value());
  EXPECT_EQ(welcome->generation, 2);
  EXPECT_EQ(welcome->serving_generation, 1);
  // A null serving generation leaves the node's pin: it is sent as null.
  ASSERT_EQ(PutDeployment(R"({"generation":2,"serving_generation":null})").status, 200);
  EXPECT_FALSE(HeartbeatAck()->serving_generation.has_value());
}

TEST_F(GenerationsTest, NodeListShowsTheLastObservationsAsSent) {
  Connect();
  wire::Heartbeat hb = MakeHeartbeat(conn_->session());
  hb.generations->push_back({1, kDigest, wire::GenerationState::kReady, std::nullopt});
  hb.generations->push_back({2, Digest(2), wire::GenerationState::kFailed,
                             std::string("configuration_invalid")});
  conn_->session().OnMessage(wire::Encode(hb), true);
  json gens = NodeView()["last_generations"];
  ASSERT_EQ(gens.size(), 2u);
  EXPECT_EQ(gens[0], (json{{"generation", 1}, {"specification_digest", kDigest}, {"state", "ready"}}));
  EXPECT_EQ(gens[1]["state"], "failed");
  EXPECT_EQ(gens[1]["diagnostic"], "configuration_invalid");
}

TEST_F(GenerationsTest, DeploymentRefusalsFollowTheIssue) {
  EXPECT_EQ(PutDeployment(R"({"generation":1,"serving_generation":null})",
                          "00000000-0000-4000-8000-000000000000")
                .status,
            404);
  EXPECT_EQ(PutDeployment(R"({"generation":7,"serving_generation":null})").status, 400);
  EXPECT_EQ(PutDeployment(R"({"generation":1,"serving_generation":7})").status, 400);
  for (const char* body : {R"({"generation":1})", R"({"generation":1.0,"serving_generation":null})",
                           R"({"generation":1,"serving_generation":null,"x":1})",
                           R"({"generation":1,"generation":1,"serving_generation":null})",
                           R"({"generation":0,"serving_generation":null})",
                           R"({"generation":null,"serving_generation":null})", "[]", ""}) {
    EXPECT_EQ(PutDeployment(body).status, 400) << body;
  }
  EXPECT_EQ(Call("POST", "/admin/v1/nodes/" + node_id_ + "/deployment",
                 R"({"generation":1,"serving_generation":null})")
                .status,
            405);
  // Another provider's generation.
  ASSERT_TRUE(devcore_->generations().Add(MustParse(SpecBytes(9, "dev-1", "microvm"))).ok());
  EXPECT_EQ(PutDeployment(R"({"generation":9,"serving_generation":null})").status, 400);
  // A node without generation management.
  std::string cred;
  const std::string plain = EnrollNode("22222222-2222-4333-8444-555555555555", false, &cred);
  EXPECT_EQ(PutDeployment(R"({"generation":1,"serving_generation":null})", plain).status, 409);
  EXPECT_TRUE(NodeView()["deployment"].is_object());
}

TEST_F(GenerationsTest, ADroppedGenerationCanNeverBeDeployedAgain) {
  ASSERT_EQ(PostGeneration(SpecBytes(2)).status, 201);
  Connect();
  ASSERT_EQ(PutDeployment(R"({"generation":2,"serving_generation":2})").status, 200);
  HeartbeatAck();
  ASSERT_EQ(Drop(1, kDigest).status, 200);
  EXPECT_EQ(PutDeployment(R"({"generation":1,"serving_generation":null})").status, 409);
  EXPECT_EQ(PutDeployment(R"({"generation":2,"serving_generation":1})").status, 409);
  EXPECT_EQ(PutDeployment(R"({"generation":2,"serving_generation":null})").status, 200);
}

TEST_F(GenerationsTest, DropsAreDurableIdempotentAndOnlyForAnnouncedPairs) {
  ASSERT_EQ(PostGeneration(SpecBytes(2)).status, 201);
  ASSERT_EQ(PostGeneration(SpecBytes(3)).status, 201);
  Connect();
  // The enrolled generation 1 is the target: 409.
  EXPECT_EQ(Drop(1, kDigest).status, 409);
  ASSERT_EQ(PutDeployment(R"({"generation":3,"serving_generation":2})").status, 200);
  // Recorded but not yet sent: 3 and 2 are not announced.
  EXPECT_EQ(Drop(2, Digest(2)).status, 400);
  HeartbeatAck();
  EXPECT_EQ(Drop(3, Digest(3)).status, 409);  // target
  EXPECT_EQ(Drop(2, Digest(2)).status, 409);  // serving
  EXPECT_EQ(Drop(1, kOtherDigest).status, 400);  // announced generation, other digest
  EXPECT_EQ(Drop(4, Digest(4, "dev-2")).status, 400);  // never held, never announced
  EXPECT_EQ(Drop(1, kDigest, "00000000-0000-4000-8000-000000000000").status, 404);
  EXPECT_EQ(Call("POST", "/admin/v1/nodes/" + node_id_ + "/drops", R"({"generation":1})").status,
            400);
  HttpResponse ok = Drop(1, kDigest);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(Drop(1, kDigest).status, 200);
  EXPECT_EQ(NodeView()["dropped"],
            (json{{{"generation", 1}, {"specification_digest", kDigest}}}));
  conn_.reset();
  Restart();
  Connect();
  EXPECT_EQ(Retention({{1, kDigest}}), std::vector<bool>{false});
  std::string cred;
  const std::string plain = EnrollNode("22222222-2222-4333-8444-555555555555", false, &cred);
  EXPECT_EQ(Drop(1, kDigest, plain).status, 409);
}

TEST_F(GenerationsTest, RetentionGrantsOnlyRecordedDropsThatAreNeitherTargetNorServing) {
  ASSERT_EQ(PostGeneration(SpecBytes(2)).status, 201);
  ASSERT_EQ(PostGeneration(SpecBytes(3)).status, 201);
  Connect();
  ASSERT_EQ(PutDeployment(R"({"generation":2,"serving_generation":null})").status, 200);
  HeartbeatAck();
  ASSERT_EQ(PutDeployment(R"({"generation":3,"serving_generation":null})").status, 200);
  HeartbeatAck();
  ASSERT_EQ(Drop(1, kDigest).status, 200);
  ASSERT_EQ(Drop(2, Digest(2)).status, 200);
  // In the node's order; unknown pairs and other digests are kept.
  EXPECT_EQ(Retention({{3, Digest(3)}, {2, Digest(2)}, {9, kOtherDigest}, {1, kDigest},
                       {1, kOtherDigest}}),
            (std::vector<bool>{true, false, true, false, true}));
  // A recorded deployment wins over --specification: with generation 1 (dropped) as the
  // current generation after a restart, the node's target is still 3 and 1 stays granted.
  conn_.reset();
  current_ = 1;
  Restart();
  Connect();
  EXPECT_EQ(Retention({{1, kDigest}, {2, Digest(2)}}), (std::vector<bool>{false, false}));
  // A drop recorded for one node grants nothing to another.
  std::string cred;
  const std::string other = EnrollNode("22222222-2222-4333-8444-555555555555", true, &cred);
  EXPECT_TRUE(KeepInRetention(*devcore_->store().Find(other),
                              DeploymentFor(*devcore_->store().Find(other),
                                            devcore_->generations()),
                              {2, Digest(2)}));
}

TEST(KeepInRetentionTest, ADroppedPairIsKeptWhileItIsTheTargetOrServingOrTheDeploymentIsUnknown) {
  NodeRecord node;
  node.generation_management = true;
  node.dropped = {{1, kDigest}, {2, kOtherDigest}};
  wire::Deployment d{3, std::string(64, 'c'), 2};
  EXPECT_FALSE(KeepInRetention(node, d, {1, kDigest}));
  EXPECT_TRUE(KeepInRetention(node, d, {2, kOtherDigest}));  // serving
  d.generation = 1;
  d.serving_generation.reset();
  EXPECT_TRUE(KeepInRetention(node, d, {1, kDigest}));  // target
  EXPECT_FALSE(KeepInRetention(node, d, {2, kOtherDigest}));
  EXPECT_TRUE(KeepInRetention(node, std::nullopt, {2, kOtherDigest}));
  EXPECT_TRUE(KeepInRetention(node, d, {4, kDigest}));  // unknown pair
}

TEST_F(GenerationsTest, RetentionCorrelationIsPerConnection) {
  Connect();
  EXPECT_EQ(Retention({{1, kDigest}}), std::vector<bool>{true});
  EXPECT_EQ(Retention({{1, kDigest}}), std::vector<bool>{true});
  // A new connection starts again at 1.
  Connect();
  EXPECT_EQ(Retention({{1, kDigest}}), std::vector<bool>{true});
  // Skipping a number closes with 4006; so does another connection id.
  wire::Retention r;
  r.id = *NewUuid();
  r.sequence = 3;
  r.connection_id = conn_->session().connection_id();
  r.owner_epoch = conn_->session().owner_epoch();
  r.entries.push_back({1, kDigest, std::nullopt});
  conn_->session().OnMessage(wire::Encode(r), true);
  EXPECT_EQ(t_->closed(), wire::kCloseCorrelation);
  Connect();
  r.sequence = 1;
  r.connection_id = "00000000-0000-4000-8000-00000000000f";
  conn_->session().OnMessage(wire::Encode(r), true);
  EXPECT_EQ(t_->closed(), wire::kCloseCorrelation);
}

}  // namespace
}  // namespace sn::devcore::testing

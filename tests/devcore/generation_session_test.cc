// A generation-managing node's connection (spec §3): deployment in welcome and every
// heartbeat_ack, per-generation health, and the retention exchange.
#include <string>
#include <variant>

#include "common/wire/codec.h"
#include "common/wire/limits.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/devcore/fixture.h"
#include "tools/devcore/crypto.h"

namespace sn::devcore::testing {
namespace {

using json = nlohmann::json;

class GenerationSessionTest : public DevcoreTest {
 protected:
  void SetUp() override {
    generation_management_ = true;
    extra_specs_ = {SpecBytes(2, "dev-2")};
    current_ = 2;
    DevcoreTest::SetUp();
    conn_ = Open(&t_);
    welcome_ = Hello(session(), t_);
  }
  Session& session() { return conn_->session(); }

  wire::Retention MakeRetention(int64_t sequence) {
    wire::Retention r;
    r.id = *NewUuid();
    r.sequence = sequence;
    r.connection_id = session().connection_id();
    r.owner_epoch = session().owner_epoch();
    r.entries.push_back({1, kDigest, std::nullopt});
    r.entries.push_back({7, kOtherDigest, std::nullopt});
    return r;
  }

  FakeTransport t_;
  std::unique_ptr<Connection> conn_;
  wire::Welcome welcome_;
};

TEST_F(GenerationSessionTest, WelcomeAndHeartbeatAckAnnounceTheTargetGeneration) {
  ASSERT_TRUE(welcome_.deployment.has_value());
  EXPECT_EQ(welcome_.deployment->generation, 2);
  EXPECT_EQ(welcome_.deployment->specification_digest, Sha256Hex(SpecBytes(2, "dev-2")));
  EXPECT_FALSE(welcome_.deployment->serving_generation.has_value());
  wire::Heartbeat hb = MakeHeartbeat(session());
  hb.generations->push_back({2, Sha256Hex(SpecBytes(2, "dev-2")), wire::GenerationState::kFailed,
                             std::string("unheard_of_code")});
  session().OnMessage(wire::Encode(hb), true);
  const wire::Frame f = t_.LastFrame();
  const auto* ack = std::get_if<wire::HeartbeatAck>(&f);
  ASSERT_NE(ack, nullptr);
  ASSERT_TRUE(ack->deployment.has_value());
  EXPECT_EQ(ack->deployment->generation, 2);
  json gens = json::parse(*devcore_->store().FindRuntime(node_id_)->last_generations_json);
  ASSERT_EQ(gens.size(), 1u);
  EXPECT_EQ(gens[0]["diagnostic"], "provider_unavailable");
}

TEST_F(GenerationSessionTest, HeartbeatWithoutGenerationsClosesWith1008) {
  wire::Heartbeat hb = MakeHeartbeat(session());
  hb.generations.reset();
  hb.health.provider_ready = true;
  session().OnMessage(wire::Encode(hb), true);
  EXPECT_EQ(t_.closed(), wire::kCloseInvalidFrame);
}

TEST_F(GenerationSessionTest, RetentionIsAckedKeepingEveryPairDevcoreDoesNotKnowAsDropped) {
  wire::Retention r = MakeRetention(1);
  session().OnMessage(wire::Encode(r), true);
  const wire::Frame f = t_.LastFrame();
  const auto* ack = std::get_if<wire::RetentionAck>(&f);
  ASSERT_NE(ack, nullptr);
  EXPECT_EQ(ack->id, r.id);
  EXPECT_EQ(ack->sequence, 1);
  ASSERT_EQ(ack->entries.size(), 2u);
  EXPECT_EQ(ack->entries[1].generation, 7);
  EXPECT_EQ(ack->entries[0].keep, true);
  EXPECT_EQ(ack->entries[1].keep, true);
  session().OnMessage(wire::Encode(MakeRetention(2)), true);
  EXPECT_FALSE(t_.closed().has_value());
}

TEST_F(GenerationSessionTest, RetentionOutOfSequenceClosesWith4006) {
  session().OnMessage(wire::Encode(MakeRetention(2)), true);
  EXPECT_EQ(t_.closed(), wire::kCloseCorrelation);
}

TEST_F(GenerationSessionTest, RetentionWithAnotherEpochClosesWith4005) {
  wire::Retention r = MakeRetention(1);
  r.owner_epoch = 5;
  session().OnMessage(wire::Encode(r), true);
  EXPECT_EQ(t_.closed(), wire::kCloseEpochMismatch);
}

}  // namespace
}  // namespace sn::devcore::testing

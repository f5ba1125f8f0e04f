// Every invalid frame closes with 1008 (1009 for size), using the codec (spec §2).
#include "tests/agent/fakes/connection_fixture.h"

namespace sn::agent::testing {
namespace {

struct BadFrame {
  const char* name;
  std::string text;
};

std::string Welcome5() {
  return std::string(R"({"type":"welcome","version":1,"connection_id":")") + kConnectionId +
         R"(","owner_epoch":5})";
}

class InvalidFrameBeforeWelcomeTest : public ConnectionTest,
                                      public ::testing::WithParamInterface<BadFrame> {};

TEST_P(InvalidFrameBeforeWelcomeTest, ClosesWith1008) {
  Make();
  conn_->Start();
  transport_.Upgrade();
  transport_.Receive(GetParam().text);
  ExpectClosedWith(wire::kCloseInvalidFrame);
  EXPECT_TRUE(sink_.lives.empty());
  EXPECT_EQ(epochs_.stores, 0);
}

const std::string kCid = kConnectionId;

INSTANTIATE_TEST_SUITE_P(
    Frames, InvalidFrameBeforeWelcomeTest,
    ::testing::Values(
        BadFrame{"not_json", "welcome"},
        BadFrame{"not_an_object", "[1,2]"},
        BadFrame{"trailing_garbage", Welcome5() + "x"},
        BadFrame{"wrong_version",
                 R"({"type":"welcome","version":2,"connection_id":")" + kCid +
                     R"(","owner_epoch":5})"},
        BadFrame{"version_as_string",
                 R"({"type":"welcome","version":"1","connection_id":")" + kCid +
                     R"(","owner_epoch":5})"},
        BadFrame{"missing_version",
                 R"({"type":"welcome","connection_id":")" + kCid + R"(","owner_epoch":5})"},
        BadFrame{"unknown_member",
                 R"({"type":"welcome","version":1,"connection_id":")" + kCid +
                     R"(","owner_epoch":5,"extra":1})"},
        BadFrame{"case_alias",
                 R"({"type":"welcome","version":1,"Connection_ID":")" + kCid +
                     R"(","owner_epoch":5})"},
        BadFrame{"duplicate_member",
                 R"({"type":"welcome","version":1,"connection_id":")" + kCid +
                     R"(","owner_epoch":5,"owner_epoch":5})"},
        BadFrame{"null_member",
                 R"({"type":"welcome","version":1,"connection_id":null,"owner_epoch":5})"},
        BadFrame{"epoch_as_float",
                 R"({"type":"welcome","version":1,"connection_id":")" + kCid +
                     R"(","owner_epoch":5.0})"},
        BadFrame{"epoch_zero",
                 R"({"type":"welcome","version":1,"connection_id":")" + kCid +
                     R"(","owner_epoch":0})"},
        BadFrame{"uppercase_uuid",
                 R"({"type":"welcome","version":1,"connection_id":"33333333-3333-4333-8333-33333333333A","owner_epoch":5})"},
        BadFrame{"type_the_node_never_accepts",
                 R"({"type":"heartbeat","version":1,"connection_id":")" + kCid +
                     R"(","owner_epoch":5})"},
        BadFrame{"unknown_type", R"({"type":"bogus","version":1})"},
        BadFrame{"heartbeat_ack_before_welcome",
                 R"({"type":"heartbeat_ack","version":1,"connection_id":")" + kCid +
                     R"(","owner_epoch":5})"}),
    [](const ::testing::TestParamInfo<BadFrame>& info) { return info.param.name; });

TEST_F(ConnectionTest, BinaryMessageClosesWith1008) {
  GoLive();
  transport_.Receive(AckText(5), /*is_text=*/false);
  ExpectClosedWith(wire::kCloseInvalidFrame);
}

TEST_F(ConnectionTest, SecondWelcomeClosesWith1008) {
  GoLive();
  transport_.Receive(WelcomeText(5));
  ExpectClosedWith(wire::kCloseInvalidFrame);
}

TEST_F(ConnectionTest, InvalidFrameOnALiveConnectionClosesWith1008) {
  GoLive();
  transport_.Receive(R"({"type":"heartbeat_ack","version":1})");
  ExpectClosedWith(wire::kCloseInvalidFrame);
  EXPECT_EQ(sink_.gone, 1);
}

TEST_F(ConnectionTest, OversizedControlFrameBeforeWelcomeClosesWith1009) {
  Make();
  conn_->Start();
  transport_.Upgrade();
  std::string big = Welcome5();
  big.insert(big.size() - 1, std::string(wire::kMaxControlFrameBytes, ' '));
  transport_.Receive(big);
  ExpectClosedWith(wire::kCloseTooLarge);
}

TEST_F(ConnectionTest, OversizedControlFrameAfterWelcomeClosesWith1009) {
  GoLive();
  std::string big = AckText(5);
  big.insert(big.size() - 1, std::string(wire::kMaxControlFrameBytes, ' '));
  transport_.Receive(big);
  ExpectClosedWith(wire::kCloseTooLarge);
}

TEST_F(ConnectionTest, RetentionAckToANodeWithoutGenerationManagementClosesWith4006) {
  GoLive();
  std::string ack = std::string(R"({"type":"retention_ack","version":1,"id":")") +
                    "66666666-6666-4666-8666-666666666666" + R"(","sequence":1,"connection_id":")" +
                    kConnectionId +
                    R"(","owner_epoch":5,"entries":[{"generation":7,"specification_digest":")" +
                    kDigest + R"(","keep":true}]})";
  transport_.Receive(ack);
  ExpectClosedWith(wire::kCloseCorrelation);
}

std::string RequestText(const std::string& connection_id, int64_t epoch, int64_t sequence) {
  return std::string(R"({"type":"request","version":1,"id":"77777777-7777-4777-8777-777777777777","connection_id":")") +
         connection_id + R"(","owner_epoch":)" + std::to_string(epoch) + R"(,"sequence":)" +
         std::to_string(sequence) +
         R"(,"generation":7,"operation":"inspect","timeout_ms":1000,"arguments":{"sandbox_id":"88888888-8888-4888-8888-888888888888"}})";
}

TEST_F(ConnectionTest, RequestForAnotherConnectionClosesWith4006) {
  GoLive(5);
  transport_.Receive(RequestText(kOtherConnectionId, 5, 1));
  ExpectClosedWith(wire::kCloseCorrelation);
  EXPECT_TRUE(sink_.requests.empty());
}

TEST_F(ConnectionTest, RequestWithAnotherEpochClosesWith4005) {
  GoLive(5);
  transport_.Receive(RequestText(kConnectionId, 4, 1));
  ExpectClosedWith(wire::kCloseEpochMismatch);
  EXPECT_TRUE(sink_.requests.empty());
}

TEST_F(ConnectionTest, MatchingRequestGoesToTheRequestLayer) {
  GoLive(5);
  transport_.Receive(RequestText(kConnectionId, 5, 1));
  ASSERT_EQ(sink_.requests.size(), 1u);
  EXPECT_EQ(sink_.requests[0].sequence, 1);
  EXPECT_TRUE(transport_.close_codes.empty());
}

TEST_F(ConnectionTest, RequestLayerCloseCodeClosesTheConnection) {
  GoLive(5);
  sink_.close_code = wire::kCloseQueueFull;
  transport_.Receive(RequestText(kConnectionId, 5, 1));
  ExpectClosedWith(wire::kCloseQueueFull);
}

TEST_F(ConnectionTest, RequestBeforeWelcomeClosesWith1008) {
  Make();
  conn_->Start();
  transport_.Upgrade();
  transport_.Receive(RequestText(kConnectionId, 5, 1));
  ExpectClosedWith(wire::kCloseInvalidFrame);
}

}  // namespace
}  // namespace sn::agent::testing

// Wire requests to privhelper's Execute and its answers back to wire outcomes.
#include "agent/requests/privhelper_convert.h"

#include "gtest/gtest.h"

namespace sn::agent {
namespace {

constexpr char kReq[] = "11111111-1111-4111-8111-111111111111";
constexpr char kBox[] = "22222222-2222-4222-8222-222222222222";
const std::string kDigest(64, 'd');

wire::Request Make(wire::Operation op, wire::Arguments args) {
  wire::Request r;
  r.id = kReq;
  r.generation = 7;
  r.operation = op;
  r.operation_name = std::string(wire::OperationName(op));
  r.timeout_ms = 1000;
  r.args = std::move(args);
  return r;
}

TEST(PrivhelperConvertTest, CreateNamesTheSpecificationsImageNameForPrivhelperToResolve) {
  wire::Request r = Make(wire::Operation::kCreate,
                         wire::CreateArgs{kBox, "busybox", std::vector<std::string>{"sh"},
                                          std::vector<std::pair<std::string, std::string>>{
                                              {"A", "1"}},
                                          500, 64 << 20});
  pb::ExecuteRequest out;
  ASSERT_TRUE(ToProto(r, &out));
  EXPECT_EQ(out.request_id(), kReq);
  EXPECT_EQ(out.generation(), 7);
  EXPECT_EQ(out.create().image(), "busybox");  // the name: privhelper resolves it
  EXPECT_EQ(out.create().command(0), "sh");
  EXPECT_EQ(out.create().env().at("A"), "1");
}

TEST(PrivhelperConvertTest, FailedCreateCarriesAReceiptWithTheEnrolledDigest) {
  wire::Request r = Make(wire::Operation::kCreate, wire::CreateArgs{kBox, "busybox", std::nullopt,
                                                                    std::nullopt, 500, 64 << 20});
  pb::ExecuteResponse resp;
  resp.set_error_code(pb::ERROR_CODE_FAILED);
  resp.mutable_create_settled()->set_request_id(kReq);
  resp.mutable_create_settled()->set_sandbox_id(kBox);
  resp.mutable_create_settled()->set_native_id("abc");
  resp.mutable_create_settled()->set_generation(7);
  ExecOutcome o = FromProto(r, resp, kDigest);
  EXPECT_EQ(o.error_code, "failed");
  ASSERT_TRUE(o.create_settled.has_value());
  EXPECT_EQ(o.create_settled->specification_digest, kDigest);
  EXPECT_EQ(o.create_settled->native_id, "abc");
}

TEST(PrivhelperConvertTest, UnsupportedCarriesItsEvidence) {
  wire::Request r = Make(wire::Operation::kKill, wire::SandboxArgs{kBox});
  pb::ExecuteResponse resp;
  resp.set_error_code(pb::ERROR_CODE_UNSUPPORTED);
  resp.mutable_unsupported()->set_operation("kill");
  resp.mutable_unsupported()->set_reason("because");
  ExecOutcome o = FromProto(r, resp, kDigest);
  EXPECT_EQ(o.error_code, "unsupported");
  ASSERT_TRUE(o.unsupported.has_value());
  EXPECT_EQ(o.unsupported->reason, "because");
}

TEST(PrivhelperConvertTest, InspectResultsFollowTheStateTable) {
  wire::Request r = Make(wire::Operation::kInspect, wire::SandboxArgs{kBox});
  pb::ExecuteResponse resp;
  resp.mutable_sandbox()->set_state(pb::SANDBOX_STATE_ABSENT);
  ExecOutcome o = FromProto(r, resp, kDigest);
  ASSERT_TRUE(o.result.has_value());
  const auto& ir = std::get<wire::InspectResult>(*o.result);
  EXPECT_EQ(ir.state, wire::SandboxState::kAbsent);
  EXPECT_FALSE(ir.native_id.has_value());
  EXPECT_EQ(ir.sandbox_id, kBox);
}

TEST(PrivhelperConvertTest, MalformedSuccessIsNeverASuccess) {
  pb::ExecuteResponse empty;  // success without the result the operation needs
  ExecOutcome create = FromProto(
      Make(wire::Operation::kCreate,
           wire::CreateArgs{kBox, "busybox", std::nullopt, std::nullopt, 500, 64 << 20}),
      empty, kDigest);
  EXPECT_EQ(create.error_code, "uncertain");
  ExecOutcome read = FromProto(
      Make(wire::Operation::kReadFile, wire::ReadFileArgs{kBox, "/etc/hostname", 10}), empty,
      kDigest);
  EXPECT_EQ(read.error_code, "unavailable");
  pb::ExecuteResponse absent_with_id;
  absent_with_id.mutable_sandbox()->set_state(pb::SANDBOX_STATE_ABSENT);
  absent_with_id.mutable_sandbox()->set_native_id("x");
  EXPECT_EQ(FromProto(Make(wire::Operation::kInspect, wire::SandboxArgs{kBox}), absent_with_id,
                      kDigest)
                .error_code,
            "unavailable");
}

// privhelper's typed refusals (issue 8 findings 1, 4, 9): the error code beside the refusal is
// the answer, and nothing else of the response is used.
TEST(PrivhelperConvertTest, TypedRefusalsAnswerTheirErrorCode) {
  const wire::Request create = Make(
      wire::Operation::kCreate,
      wire::CreateArgs{kBox, "busybox", std::nullopt, std::nullopt, 500, 64 << 20});
  const std::pair<pb::Refusal, pb::ErrorCode> cases[] = {
      {pb::REFUSAL_ARGUMENTS, pb::ERROR_CODE_INVALID},
      {pb::REFUSAL_GENERATION_NOT_HELD, pb::ERROR_CODE_UNCONFIRMED},
      {pb::REFUSAL_ADMISSION, pb::ERROR_CODE_UNAVAILABLE},
      {pb::REFUSAL_INSTALLATION, pb::ERROR_CODE_UNAVAILABLE}};
  const char* expected[] = {"invalid", "unconfirmed", "unavailable", "unavailable"};
  for (size_t i = 0; i < 4; ++i) {
    pb::ExecuteResponse resp;
    resp.set_refusal(cases[i].first);
    resp.set_error_code(cases[i].second);
    ExecOutcome o = FromProto(create, resp, kDigest);
    EXPECT_EQ(o.error_code, expected[i]) << pb::Refusal_Name(cases[i].first);
    EXPECT_FALSE(o.result.has_value());
    EXPECT_FALSE(o.create_settled.has_value());
  }
}

TEST(PrivhelperConvertTest, RefusalClaimingSuccessIsNeverASuccess) {
  pb::ExecuteResponse resp;
  resp.set_refusal(pb::REFUSAL_ARGUMENTS);
  resp.mutable_sandbox()->set_state(pb::SANDBOX_STATE_RUNNING);
  resp.mutable_sandbox()->set_native_id("abc");
  EXPECT_EQ(FromProto(Make(wire::Operation::kKill, wire::SandboxArgs{kBox}), resp, kDigest)
                .error_code,
            "uncertain");
  EXPECT_EQ(FromProto(Make(wire::Operation::kInspect, wire::SandboxArgs{kBox}), resp, kDigest)
                .error_code,
            "unavailable");
}

TEST(PrivhelperConvertTest, NoResultOperationsSucceedWithoutAResult) {
  pb::ExecuteResponse ok;
  ExecOutcome o = FromProto(Make(wire::Operation::kKill, wire::SandboxArgs{kBox}), ok, kDigest);
  EXPECT_FALSE(o.result.has_value());
  EXPECT_FALSE(o.error_code.has_value());
}

}  // namespace
}  // namespace sn::agent

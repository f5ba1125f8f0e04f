// Typed encode/decode of every frame and operation result, and the request layers.
#include <string>

#include "common/json/base64.h"
#include "common/wire/codec.h"
#include "common/wire/validate.h"
#include "gtest/gtest.h"

namespace sn::wire {
namespace {

constexpr char kU1[] = "0f8fad5b-d9cb-469f-a165-70867728950e";
constexpr char kU2[] = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
const std::string kDigest(64, 'b');

Request BaseRequest(Operation op, Arguments args) {
  Request r;
  r.id = kU1;
  r.connection_id = kU2;
  r.owner_epoch = 3;
  r.sequence = 9;
  r.generation = 2;
  r.operation = op;
  r.operation_name = std::string(OperationName(op));
  r.timeout_ms = 1000;
  r.args = std::move(args);
  return r;
}

Request RoundTripRequest(const Request& r) {
  absl::StatusOr<Frame> f = Decode(Encode(r), Role::kNode);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return {};
  return std::get<Request>(*f);
}

TEST(CodecTest, EveryOperationsArgumentsRoundTrip) {
  std::string binary;
  for (int i = 0; i < 256; ++i) binary.push_back(static_cast<char>(i));
  const std::vector<std::pair<Operation, Arguments>> cases = {
      {Operation::kCreate,
       CreateArgs{kU2, "img", std::vector<std::string>{"a", "\xc3\xa9", "\"q\""},
                  std::vector<std::pair<std::string, std::string>>{{"B", "1"}, {"A", "\n"}},
                  1000, kMinMemoryBytes}},
      {Operation::kCreate, CreateArgs{kU2, "img", std::nullopt, std::nullopt, 1, kMaxMemoryBytes}},
      {Operation::kResume, ResumeArgs{kU2, true}},
      {Operation::kKill, SandboxArgs{kU2}},
      {Operation::kKillCompute, SandboxArgs{kU2}},
      {Operation::kDeleteRetained, SandboxArgs{kU2}},
      {Operation::kInspect, SandboxArgs{kU2}},
      {Operation::kExec, ExecArgs{kU2, {"sh", "-c", "cat"}, binary, kMaxOutputLimitBytes}},
      {Operation::kExec, ExecArgs{kU2, {"true"}, std::nullopt, 0}},
      {Operation::kWriteFile, WriteFileArgs{kU2, "/a/b", binary, 0644}},
      {Operation::kReadFile, ReadFileArgs{kU2, "/a", kMaxReadFileBytes}},
      {Operation::kObserve, ObserveArgs{kU1}},
  };
  for (const auto& [op, args] : cases) {
    SCOPED_TRACE(std::string(OperationName(op)));
    const Request r = BaseRequest(op, args);
    const Request got = RoundTripRequest(r);
    EXPECT_FALSE(got.request_error.has_value()) << *got.request_error;
    EXPECT_TRUE(got == r);
  }
}

TEST(CodecTest, EnvKeepsWireOrder) {
  const Request r = BaseRequest(
      Operation::kCreate,
      CreateArgs{kU2, "img", std::nullopt,
                 std::vector<std::pair<std::string, std::string>>{{"Z", "1"}, {"A", "2"}}, 1,
                 kMinMemoryBytes});
  const Request got = RoundTripRequest(r);
  ASSERT_TRUE(std::get<CreateArgs>(got.args).env.has_value());
  EXPECT_EQ((*std::get<CreateArgs>(got.args).env)[0].first, "Z");
}

TEST(CodecTest, RequestLayerFailureKeepsTheEnvelope) {
  Request r = BaseRequest(Operation::kInspect, SandboxArgs{kU2});
  r.timeout_ms = kMaxTimeoutMs + 1;
  const Request got = RoundTripRequest(r);
  ASSERT_TRUE(got.request_error.has_value());
  EXPECT_EQ(got.id, kU1);
  EXPECT_EQ(got.sequence, 9);
  EXPECT_EQ(got.owner_epoch, 3);
}

TEST(CodecTest, WriteFileAtTheDecodedLimitIsAcceptedAndOneByteMoreIsARequestError) {
  Request r = BaseRequest(Operation::kWriteFile,
                          WriteFileArgs{kU2, "/f", std::string(kMaxFileContentBytes, 'x'), 0600});
  EXPECT_FALSE(RoundTripRequest(r).request_error.has_value());
  std::get<WriteFileArgs>(r.args).content.push_back('y');
  const Request got = RoundTripRequest(r);
  ASSERT_TRUE(got.request_error.has_value());
  EXPECT_NE(got.request_error->find("request.arguments.content: longer than"), std::string::npos);
}

Response Roundtrip(const Response& r) {
  absl::StatusOr<Frame> f = Decode(Encode(r), Role::kCore);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return {};
  return std::get<Response>(*f);
}

TEST(CodecTest, EveryResultRoundTripsThroughRawResultAndDecodeResult) {
  RecordedResponse rec{kU1, MutationResult(ExecResult{3, "", "", true}), std::nullopt,
                       std::nullopt, std::nullopt};
  const std::vector<std::pair<Operation, Result>> cases = {
      {Operation::kCreate, CreateResult{kU2, "native"}},
      {Operation::kResume, ResumeResult{kU2, "n", SandboxState::kRetained}},
      {Operation::kInspect, InspectResult{kU2, SandboxState::kAbsent, std::nullopt}},
      {Operation::kInspect, InspectResult{kU2, SandboxState::kRunning, "n"}},
      {Operation::kExec, ExecResult{-1, "out\x00put", "err", false}},
      {Operation::kWriteFile, WriteFileResult{12}},
      {Operation::kReadFile, ReadFileResult{"abc", 10, true}},
      {Operation::kReadFile, ReadFileResult{"abc", 3, false}},
      {Operation::kObserve, ObserveResult{kU1, std::nullopt, ObserveState::kUnknown, std::nullopt}},
      {Operation::kObserve, ObserveResult{kU1, "exec", ObserveState::kCompleted, rec}},
      {Operation::kObserve, ObserveResult{kU1, "kill", ObserveState::kRunning, std::nullopt}},
  };
  for (const auto& [op, result] : cases) {
    SCOPED_TRACE(std::string(OperationName(op)));
    Response r;
    r.id = kU1;
    r.connection_id = kU2;
    r.result = result;
    const Response got = Roundtrip(r);
    ASSERT_TRUE(got.raw_result.has_value());
    absl::StatusOr<Result> typed = DecodeResult(op, *got.raw_result);
    ASSERT_TRUE(typed.ok()) << typed.status();
    EXPECT_TRUE(*typed == result);
    // A decoded response re-encodes its raw result verbatim.
    EXPECT_TRUE(Roundtrip(got) == got);
  }
}

TEST(CodecTest, DecodeResultRejectsAShapeOfAnotherOperation) {
  EXPECT_FALSE(DecodeResult(Operation::kWriteFile, R"({"sandbox_id":"x"})").ok());
  EXPECT_FALSE(DecodeResult(Operation::kKill, "{}").ok());
  EXPECT_FALSE(DecodeResult(Operation::kCreate,
                            std::string(R"({"sandbox_id":")") + kU2 +
                                R"(","native_id":"n","state":"retained"})")
                   .ok());
  EXPECT_FALSE(DecodeResult(Operation::kInspect,
                            std::string(R"({"sandbox_id":")") + kU2 + R"(","state":"absent","native_id":"n"})")
                   .ok());
  EXPECT_FALSE(DecodeResult(Operation::kReadFile, R"({"content":"YWJj","size":3,"truncated":true})").ok());
}

TEST(CodecTest, ObserveResultPresenceRulesAreEnforced) {
  const std::string id = std::string("\"") + kU1 + "\"";
  // operation present iff state != unknown; response present iff completed.
  EXPECT_FALSE(DecodeResult(Operation::kObserve, "{\"operation_id\":" + id + ",\"state\":\"running\"}").ok());
  EXPECT_FALSE(DecodeResult(Operation::kObserve, "{\"operation_id\":" + id +
                                                     ",\"operation\":\"kill\",\"state\":\"unknown\"}").ok());
  EXPECT_FALSE(DecodeResult(Operation::kObserve, "{\"operation_id\":" + id +
                                                     ",\"operation\":\"kill\",\"state\":\"completed\"}").ok());
  EXPECT_FALSE(DecodeResult(Operation::kObserve, "{\"operation_id\":" + id +
                                                     ",\"operation\":\"inspect\",\"state\":\"running\"}").ok());
  // A recorded kill has no result; a recorded write_file success needs one.
  EXPECT_FALSE(DecodeResult(Operation::kObserve,
                            "{\"operation_id\":" + id + ",\"operation\":\"kill\",\"state\":\"completed\","
                            "\"response\":{\"id\":" + id + ",\"result\":{\"size\":1}}}").ok());
  EXPECT_FALSE(DecodeResult(Operation::kObserve,
                            "{\"operation_id\":" + id + ",\"operation\":\"write_file\",\"state\":\"completed\","
                            "\"response\":{\"id\":" + id + "}}").ok());
  EXPECT_TRUE(DecodeResult(Operation::kObserve,
                           "{\"response\":{\"id\":" + id + ",\"error_code\":\"uncertain\"},\"operation_id\":" +
                               id + ",\"state\":\"completed\",\"operation\":\"write_file\"}").ok());
}

TEST(CodecTest, RecordedResponsesRoundTrip) {
  const RecordedResponse failed{kU1, std::nullopt, "failed",
                                CreateSettled{kU1, kU2, "n", 4, kDigest}, std::nullopt};
  absl::StatusOr<RecordedResponse> a = DecodeRecordedResponse(EncodeRecordedResponse(failed));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(*a == failed);
  const RecordedResponse resumed{kU1, MutationResult(ResumeResult{kU2, "n", SandboxState::kRunning}),
                                 std::nullopt, std::nullopt, std::nullopt};
  absl::StatusOr<RecordedResponse> b =
      DecodeRecordedResponse(Operation::kResume, EncodeRecordedResponse(resumed));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(*b == resumed);
  EXPECT_FALSE(DecodeRecordedResponse(EncodeRecordedResponse(resumed) + "x").ok());
}

TEST(CodecTest, ControlFramesRoundTrip) {
  Health h;
  h.provider_ready = false;
  h.diagnostic = "daemon_unreachable";
  h.observed_at = "2026-11-29T12:00:00.123456789Z";
  h.active_operations = {{kU1, "exec", ActiveState::kQueued}};
  h.host.load_1m = "9999999.999999";
  h.host.cpu_cores = 64;
  Hello hello{kU1, kU2, "docker", "fp \xe2\x82\xac", 1, kDigest, 100000, 0, h, false, {}};
  Heartbeat hb{kU1, 1, h, std::nullopt};
  Health gm = h;
  gm.provider_ready.reset();
  gm.diagnostic.reset();
  Heartbeat hbgm{kU1, INT64_MAX, gm,
                 std::vector<Observation>{{1, kDigest, GenerationState::kPreparing, "provider_starting"}}};
  Retention ret{kU1, 1, kU2, 2, {{1, kDigest, std::nullopt}, {2, kDigest, std::nullopt}}};
  for (const Frame& f : {Frame(hello), Frame(hb), Frame(hbgm), Frame(ret)}) {
    absl::StatusOr<Frame> g = Decode(Encode(f), Role::kCore);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE(*g == f);
  }
  Welcome w{kU1, 5, Deployment{3, kDigest, std::nullopt}};
  HeartbeatAck ack{kU1, 5, Deployment{3, kDigest, 2}};
  RetentionAck rack{kU1, 1, kU2, 2, {{1, kDigest, false}, {1, kDigest, true}}};
  for (const Frame& f : {Frame(w), Frame(ack), Frame(rack)}) {
    absl::StatusOr<Frame> g = Decode(Encode(f), Role::kNode);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE(*g == f);
  }
}

TEST(ValidateTest, TimestampsAreRfc3339UtcWithRealDates) {
  for (const char* ok : {"2024-02-29T00:00:00Z", "2026-12-31T23:59:59.1Z", "2000-02-29T12:00:00Z"}) {
    EXPECT_TRUE(IsTimestamp(ok)) << ok;
  }
  for (const char* bad : {"2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-13-01T00:00:00Z",
                          "2026-11-29T24:00:00Z", "2026-11-29T12:00:60Z", "2026-11-29 12:00:00Z",
                          "2026-11-29T12:00:00.Z", "2026-11-29T12:00:00"}) {
    EXPECT_FALSE(IsTimestamp(bad)) << bad;
  }
}

TEST(ValidateTest, SandboxPathsAreAbsoluteWithoutDotOrEmptyComponents) {
  EXPECT_TRUE(IsSandboxPath("/a"));
  EXPECT_TRUE(IsSandboxPath("/a/.b/c..d/..."));
  for (const char* bad : {"", "/", "a", "/a/", "//a", "/./a", "/a/..", "/a/."}) {
    EXPECT_FALSE(IsSandboxPath(bad)) << bad;
  }
  EXPECT_TRUE(IsSandboxPath("/" + std::string(kMaxPathBytes - 1, 'a')));
  EXPECT_FALSE(IsSandboxPath("/" + std::string(kMaxPathBytes, 'a')));
}

}  // namespace
}  // namespace sn::wire

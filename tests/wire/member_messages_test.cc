// The exact messages of the member rules (missing, unknown, out of range) for every object of the
// control frames (§3), the request and its arguments (§4-§5), the response, results and
// recorded responses (§5) and the HTTP bodies (§6), and which field each member fills: a member
// resolved to the wrong field, or listed out of order, changes one of these lines.
#include <fstream>
#include <iterator>
#include <string>
#include <variant>

#include "common/wire/codec.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"

namespace sn::wire {
namespace {

std::string Vector(const std::string& name) {
  std::ifstream in("tests/testdata/wire/vectors/" + name + ".json", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `base` with the first occurrence of `from` replaced by `to`.
std::string Edit(std::string base, const std::string& from, const std::string& to) {
  const size_t at = base.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) base.replace(at, from.size(), to);
  return base;
}

std::string Message(std::string_view frame, Role receiver) {
  absl::StatusOr<Frame> f = Decode(frame, receiver);
  if (f.ok()) return "decoded";
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  return std::string(f.status().message());
}

template <typename T>
std::string Message(const absl::StatusOr<T>& s) {
  return s.ok() ? "decoded" : std::string(s.status().message());
}

constexpr char kHost[] =
    "{\"cpu_cores\":4,\"load_1m\":0.25,\"memory_total_bytes\":8589934592,"
    "\"memory_available_bytes\":4294967296,\"disk_total_bytes\":107374182400,"
    "\"disk_available_bytes\":53687091200,\"sandboxes_active\":1,\"sandboxes_retained\":2}";

TEST(MemberMessagesTest, EachHostMemberFillsItsOwnField) {
  absl::StatusOr<Frame> f = Decode(Vector("valid_core_heartbeat"), Role::kCore);
  ASSERT_TRUE(f.ok()) << f.status();
  const HostMetrics& h = std::get<Heartbeat>(*f).health.host;
  EXPECT_EQ(h.cpu_cores, 4);
  EXPECT_EQ(h.load_1m, "0.25");
  EXPECT_EQ(h.memory_total_bytes, 8589934592);
  EXPECT_EQ(h.memory_available_bytes, 4294967296);
  EXPECT_EQ(h.disk_total_bytes, 107374182400);
  EXPECT_EQ(h.disk_available_bytes, 53687091200);
  EXPECT_EQ(h.sandboxes_active, 1);
  EXPECT_EQ(h.sandboxes_retained, 2);
}

TEST(MemberMessagesTest, HostMembersAreRangeCheckedUnderTheirOwnNames) {
  const std::string hb = Vector("valid_core_heartbeat");
  ASSERT_NE(hb.find(kHost), std::string::npos);
  EXPECT_EQ(Message(Edit(hb, "\"cpu_cores\":4", "\"cpu_cores\":0"), Role::kCore),
            "heartbeat.health.host.cpu_cores: out of range [1, 9223372036854775807]");
  EXPECT_EQ(Message(Edit(hb, "\"load_1m\":0.25", "\"load_1m\":\"0.25\""), Role::kCore),
            "heartbeat.health.host.load_1m: not a number");
  for (const char* m : {"memory_total_bytes", "memory_available_bytes", "disk_total_bytes",
                        "disk_available_bytes", "sandboxes_active", "sandboxes_retained"}) {
    const std::string member = std::string("\"") + m + "\":";
    const std::string bad = Edit(hb, member, member + "-1,\"x\":");
    // The edit leaves `"m":-1,"x":VALUE`: the range error comes before the unknown member.
    EXPECT_EQ(Message(bad, Role::kCore),
              std::string("heartbeat.health.host.") + m + ": out of range [0, 9223372036854775807]");
  }
  EXPECT_EQ(Message(Edit(hb, kHost, "{}"), Role::kCore),
            "heartbeat.health.host: missing members 'cpu_cores', 'load_1m', "
            "'memory_total_bytes', 'memory_available_bytes', 'disk_total_bytes', "
            "'disk_available_bytes', 'sandboxes_active', 'sandboxes_retained'");
  EXPECT_EQ(Message(Edit(hb, "\"load_1m\":0.25,", ""), Role::kCore),
            "heartbeat.health.host: missing member 'load_1m'");
  EXPECT_EQ(Message(Edit(hb, "\"cpu_cores\":4,", "\"cpu_cores\":4,\"cpu\":1,"), Role::kCore),
            "heartbeat.health.host: unknown member 'cpu'");
}

TEST(MemberMessagesTest, ControlFrameObjectsListEveryMissingMemberInOrder) {
  const std::string hb = Vector("valid_core_heartbeat");
  EXPECT_EQ(Message("{\"type\":\"heartbeat\",\"version\":1}", Role::kCore),
            "heartbeat: missing members 'connection_id', 'owner_epoch', 'health'");
  EXPECT_EQ(Message(Edit(hb, "\"health\":{\"provider_ready\":true,", "\"health\":{\"x\":{},"),
                    Role::kCore),
            "heartbeat.health: unknown member 'x'");
  EXPECT_EQ(Message(Edit(hb, "{\"id\":\"16fd2706-8baf-433b-82eb-8c7fada847da\",\"operation\":"
                             "\"exec\",\"state\":\"running\"}",
                         "{}"),
                    Role::kCore),
            "heartbeat.health.active_operations[0]: missing members 'id', 'operation', 'state'");
  EXPECT_EQ(Message(Edit(hb, "\"state\":\"running\"", "\"state\":\"done\""), Role::kCore),
            "heartbeat.health.active_operations[0].state: not one of \"queued\" | \"running\"");

  EXPECT_EQ(Message("{\"type\":\"hello\",\"version\":1}", Role::kCore),
            "hello: missing members 'node_id', 'installation_id', 'provider', "
            "'backend_fingerprint', 'deployment_generation', 'specification_digest', "
            "'max_active', 'max_retained', 'health'");
  const std::string gm = Vector("valid_core_hello_gm");
  EXPECT_EQ(Message(Edit(gm, "{\"generation\":3,", "{\"x\":3,"), Role::kCore),
            "hello.generations[0]: unknown member 'x'");
  EXPECT_EQ(Message(Edit(gm, "\"generations\":[{\"generation\":3,", "\"generations\":[{}, {"),
                    Role::kCore),
            "hello.generations[0]: missing members 'generation', 'specification_digest', 'state'");
  EXPECT_EQ(Message(Edit(gm, ",\"generation_management\":true", ""), Role::kCore),
            "hello: generations must be present exactly when generation_management is");
  EXPECT_EQ(Message(Edit(gm, "\"observed_at\"", "\"provider_ready\":true,\"observed_at\""),
                    Role::kCore),
            "hello.health: provider_ready must be absent for a generation-managing node");

  EXPECT_EQ(Message("{\"type\":\"welcome\",\"version\":1}", Role::kNode),
            "welcome: missing members 'connection_id', 'owner_epoch'");
  EXPECT_EQ(Message("{\"type\":\"heartbeat_ack\",\"version\":1}", Role::kNode),
            "heartbeat_ack: missing members 'connection_id', 'owner_epoch'");
  const std::string welcome = Vector("valid_node_welcome_deployment");
  EXPECT_EQ(Message(Edit(welcome, "\"generation\":3,", ""), Role::kNode),
            "welcome.deployment: missing member 'generation'");
  EXPECT_EQ(Message(Edit(welcome, "\"deployment\":{", "\"deployment\":{\"x\":1,"), Role::kNode),
            "welcome.deployment: unknown member 'x'");
  EXPECT_EQ(Message(Edit(welcome, "\"serving_generation\":2", "\"serving_generation\":0"),
                    Role::kNode),
            "welcome.deployment.serving_generation: not a positive int64");

  EXPECT_EQ(Message("{\"type\":\"retention\",\"version\":1}", Role::kCore),
            "retention: missing members 'id', 'sequence', 'connection_id', 'owner_epoch', "
            "'entries'");
}

TEST(MemberMessagesTest, KeepIsUnknownInARetentionRequestAndRequiredInItsAck) {
  const std::string ret = Vector("valid_core_retention");
  EXPECT_EQ(Message(Edit(ret, "{\"generation\":2,", "{\"keep\":true,\"generation\":2,"),
                    Role::kCore),
            "retention.entries[0]: unknown member 'keep'");
  EXPECT_EQ(Message(Edit(ret, "\"entries\":[{", "\"entries\":[{}, {"), Role::kCore),
            "retention.entries[0]: missing members 'generation', 'specification_digest'");
  const std::string ack = Vector("valid_node_retention_ack");
  EXPECT_EQ(Message(Edit(ack, ",\"keep\":false", ""), Role::kNode),
            "retention_ack.entries[0]: missing member 'keep'");
  EXPECT_EQ(Message(Edit(ack, "\"entries\":[{", "\"entries\":[{}, {"), Role::kNode),
            "retention_ack.entries[0]: missing members 'generation', 'specification_digest', "
            "'keep'");
}

TEST(MemberMessagesTest, HttpBodiesListEveryMissingMemberInOrder) {
  EXPECT_EQ(Message(DecodeEnrollRequest("{}")),
            "enroll_request: missing members 'enrollment_token', 'installation_id', 'provider', "
            "'backend_fingerprint', 'max_active', 'max_retained', 'generation_management'");
  EXPECT_EQ(Message(DecodeEnrollRequest("{\"bogus\":1}")), "enroll_request: unknown member 'bogus'");
  EXPECT_EQ(Message(DecodeEnrollResponse("{}")),
            "enroll_response: missing members 'node_id', 'credential', 'deployment_generation', "
            "'specification_digest', 'runtime_source'");
  EXPECT_EQ(Message(DecodeSpecificationDocument("{}")),
            "specification: missing members 'schema', 'generation', 'provider', 'runtime', "
            "'images'");
  EXPECT_EQ(Message(DecodeSpecificationDocument("{\"runtime\":{}}")),
            "specification.runtime: missing members 'source', 'artifacts'");
  EXPECT_EQ(Message(DecodeSpecificationDocument("{\"runtime\":{\"kind\":1}}")),
            "specification.runtime: unknown member 'kind'");
  EXPECT_EQ(Message(DecodeSpecificationDocument("{\"runtime\":{\"artifacts\":[{}]}}")),
            "specification.runtime.artifacts[0]: missing members 'name', 'kind', 'sha256', "
            "'size'");
  EXPECT_EQ(Message(DecodeSpecificationDocument(
                "{\"runtime\":{\"artifacts\":[{\"kind\":\"agent\"}]}}")),
            "specification.runtime.artifacts[0].kind: not one of \"helper\" | \"guest_agent\" | "
            "\"firmware\" | \"kernel\" | \"seccomp\" | \"image\"");
  EXPECT_EQ(Message(DecodeSpecificationDocument("{\"images\":[{}]}")),
            "specification.images[0]: missing members 'name', 'artifact', 'identities'");
  EXPECT_EQ(Message(DecodeSpecificationDocument("{\"images\":[{\"identities\":[\"x\"]}]}")),
            "specification.images[0].identities[0]: not \"sha256:\" followed by a digest");
  EXPECT_EQ(Message(DecodeReleaseManifest("{}")),
            "manifest: missing members 'schema', 'source', 'published_at', 'artifacts'");
  EXPECT_EQ(Message(DecodeReleaseManifest("{\"artifacts\":[{\"size\":-1}]}")),
            "manifest.artifacts[0].size: out of range [0, 9223372036854775807]");
  EXPECT_EQ(Message(DecodeCurrentRelease("{}")), "current_release: missing member 'source'");
  EXPECT_EQ(Message(DecodeCurrentRelease("{\"source\":\"current\"}")),
            "current_release.source: not a release source name other than \"current\"");
  EXPECT_EQ(Message(DecodeCurrentRelease("{\"source\":\"r1\",\"x\":1}")),
            "current_release: unknown member 'x'");
}

constexpr char kU1[] = "0f8fad5b-d9cb-469f-a165-70867728950e";
constexpr char kU2[] = "7c9e6679-7425-40de-944b-e07fc1f90ae7";

std::string RequestFrame(const std::string& operation, const std::string& arguments) {
  return std::string("{\"type\":\"request\",\"version\":1,\"id\":\"") + kU1 +
         "\",\"connection_id\":\"" + kU2 +
         "\",\"owner_epoch\":1,\"sequence\":1,\"generation\":1,\"operation\":\"" + operation +
         "\",\"timeout_ms\":1000,\"arguments\":" + arguments + "}";
}

// The frame's error, or the request layer's (answered `invalid`), or "decoded".
std::string RequestMessage(const std::string& frame) {
  absl::StatusOr<Frame> f = Decode(frame, Role::kNode);
  if (!f.ok()) return std::string(f.status().message());
  const Request& r = std::get<Request>(*f);
  return r.request_error.value_or("decoded");
}

std::string ArgsMessage(const std::string& operation, const std::string& arguments) {
  return RequestMessage(RequestFrame(operation, arguments));
}

TEST(MemberMessagesTest, RequestEnvelopeListsEveryMissingMemberAndChecksEachUnderItsName) {
  EXPECT_EQ(Message("{\"type\":\"request\",\"version\":1}", Role::kNode),
            "request: missing members 'id', 'connection_id', 'owner_epoch', 'sequence', "
            "'generation', 'operation', 'timeout_ms', 'arguments'");
  const std::string ok = RequestFrame("inspect", std::string("{\"sandbox_id\":\"") + kU2 + "\"}");
  EXPECT_EQ(RequestMessage(ok), "decoded");
  EXPECT_EQ(RequestMessage(Edit(ok, "\"sequence\":1,", "\"sequence\":1,\"x\":1,")),
            "request: unknown member 'x'");
  EXPECT_EQ(RequestMessage(Edit(ok, "\"sequence\":1,", "")), "request: missing member 'sequence'");
  EXPECT_EQ(RequestMessage(Edit(ok, kU1, "x")), "request.id: not a canonical lowercase uuid");
  EXPECT_EQ(RequestMessage(Edit(ok, "\"connection_id\":\"" + std::string(kU2),
                                "\"connection_id\":\"x")),
            "request.connection_id: not a canonical lowercase uuid");
  EXPECT_EQ(RequestMessage(Edit(ok, "\"owner_epoch\":1", "\"owner_epoch\":0")),
            "request.owner_epoch: not a positive int64");
  EXPECT_EQ(RequestMessage(Edit(ok, "\"sequence\":1", "\"sequence\":0")),
            "request.sequence: not a positive int64");
  EXPECT_EQ(RequestMessage(Edit(ok, "\"generation\":1", "\"generation\":\"1\"")),
            "request.generation: not an int64");
  EXPECT_EQ(RequestMessage(Edit(ok, "\"operation\":\"inspect\"", "\"operation\":1")),
            "request.operation: not a string");
  EXPECT_EQ(RequestMessage(Edit(ok, "\"timeout_ms\":1000", "\"timeout_ms\":\"1\"")),
            "request.timeout_ms: not an int64");
  EXPECT_EQ(ArgsMessage("inspect", "[]"), "request.arguments: not an object");
  // The request layer (an `invalid` response, not a frame error).
  EXPECT_EQ(RequestMessage(Edit(ok, "\"operation\":\"inspect\"", "\"operation\":\"x\"")),
            "request.operation: unknown operation");
  EXPECT_EQ(RequestMessage(Edit(ok, "\"generation\":1", "\"generation\":0")),
            "request.generation: not a positive int64");
  EXPECT_EQ(RequestMessage(Edit(ok, "\"timeout_ms\":1000", "\"timeout_ms\":0")),
            "request.timeout_ms: out of range [1, 3600000]");
}

TEST(MemberMessagesTest, ArgumentsListEveryMissingMemberInOrder) {
  EXPECT_EQ(ArgsMessage("create", "{}"),
            "request.arguments: missing members 'sandbox_id', 'image', 'cpu_millis', "
            "'memory_bytes'");
  EXPECT_EQ(ArgsMessage("resume", "{}"),
            "request.arguments: missing members 'sandbox_id', 'reconciliation_only'");
  for (const char* op : {"kill", "kill_compute", "delete_retained", "inspect"}) {
    EXPECT_EQ(ArgsMessage(op, "{}"), "request.arguments: missing member 'sandbox_id'") << op;
  }
  EXPECT_EQ(ArgsMessage("exec", "{}"),
            "request.arguments: missing members 'sandbox_id', 'argv', 'output_limit_bytes'");
  EXPECT_EQ(ArgsMessage("write_file", "{}"),
            "request.arguments: missing members 'sandbox_id', 'path', 'content', 'mode'");
  EXPECT_EQ(ArgsMessage("read_file", "{}"),
            "request.arguments: missing members 'sandbox_id', 'path', 'max_bytes'");
  EXPECT_EQ(ArgsMessage("observe", "{}"), "request.arguments: missing member 'operation_id'");
  EXPECT_EQ(ArgsMessage("inspect", "{\"operation_id\":1}"),
            "request.arguments: unknown member 'operation_id'");
}

TEST(MemberMessagesTest, ArgumentMembersAreCheckedUnderTheirOwnNames) {
  const struct {
    const char* op;
    const char* arguments;
    const char* message;
  } cases[] = {
      {"create", "{\"sandbox_id\":\"X\"}",
       "request.arguments.sandbox_id: not a canonical lowercase uuid"},
      {"create", "{\"image\":1}", "request.arguments.image: not a string"},
      {"create", "{\"command\":{}}", "request.arguments.command: not an array"},
      {"create", "{\"env\":[]}", "request.arguments.env: not an object"},
      {"create", "{\"cpu_millis\":0}", "request.arguments.cpu_millis: out of range [1, 256000]"},
      {"create", "{\"memory_bytes\":1}",
       "request.arguments.memory_bytes: out of range [16777216, 1099511627776]"},
      {"resume", "{\"sandbox_id\":1}", "request.arguments.sandbox_id: not a string"},
      {"resume", "{\"reconciliation_only\":1}",
       "request.arguments.reconciliation_only: not a boolean"},
      {"kill", "{\"sandbox_id\":\"X\"}",
       "request.arguments.sandbox_id: not a canonical lowercase uuid"},
      {"exec", "{\"sandbox_id\":1}", "request.arguments.sandbox_id: not a string"},
      {"exec", "{\"argv\":{}}", "request.arguments.argv: not an array"},
      {"exec", "{\"stdin\":1}", "request.arguments.stdin: not a string"},
      {"exec", "{\"output_limit_bytes\":-1}",
       "request.arguments.output_limit_bytes: out of range [0, 33554432]"},
      {"write_file", "{\"sandbox_id\":1}", "request.arguments.sandbox_id: not a string"},
      {"write_file", "{\"path\":1}", "request.arguments.path: not a string"},
      {"write_file", "{\"content\":1}", "request.arguments.content: not a string"},
      {"write_file", "{\"mode\":512}", "request.arguments.mode: out of range [0, 511]"},
      {"read_file", "{\"sandbox_id\":1}", "request.arguments.sandbox_id: not a string"},
      {"read_file", "{\"path\":1}", "request.arguments.path: not a string"},
      {"read_file", "{\"max_bytes\":-1}",
       "request.arguments.max_bytes: out of range [0, 50331648]"},
      {"observe", "{\"operation_id\":\"X\"}",
       "request.arguments.operation_id: not a canonical lowercase uuid"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ArgsMessage(c.op, c.arguments), c.message) << c.op << " " << c.arguments;
  }
}

std::string ResponseFrame(const std::string& rest) {
  return std::string("{\"type\":\"response\",\"version\":1,\"id\":\"") + kU1 +
         "\",\"connection_id\":\"" + kU2 + "\"" + rest + "}";
}

std::string ResultMessage(Operation op, const std::string& result) {
  return Message(DecodeResult(op, result));
}

TEST(MemberMessagesTest, ResponseListsEveryMissingMemberAndChecksEachUnderItsName) {
  EXPECT_EQ(Message("{\"type\":\"response\",\"version\":1}", Role::kCore),
            "response: missing members 'id', 'connection_id'");
  EXPECT_EQ(Message(ResponseFrame(""), Role::kCore), "decoded");
  EXPECT_EQ(Message(ResponseFrame(",\"x\":1"), Role::kCore), "response: unknown member 'x'");
  EXPECT_EQ(Message(Edit(ResponseFrame(""), kU1, "x"), Role::kCore),
            "response.id: not a canonical lowercase uuid");
  EXPECT_EQ(Message(Edit(ResponseFrame(""), kU2, "x"), Role::kCore),
            "response.connection_id: not a canonical lowercase uuid");
  EXPECT_EQ(Message(ResponseFrame(",\"result\":[]"), Role::kCore),
            "response.result: not an object");
  EXPECT_EQ(Message(ResponseFrame(",\"error_code\":\"x\""), Role::kCore),
            "response.error_code: not one of \"invalid\" | \"unsupported\" | \"capacity\" | "
            "\"conflict\" | \"not_found\" | \"failed\" | \"unconfirmed\" | \"unavailable\" | "
            "\"uncertain\"");
  EXPECT_EQ(Message(ResponseFrame(",\"error_code\":\"failed\",\"info\":{}"), Role::kCore),
            "response.info: missing member 'create_settled'");
  EXPECT_EQ(Message(ResponseFrame(",\"error_code\":\"failed\",\"info\":{\"x\":1}"), Role::kCore),
            "response.info: unknown member 'x'");
  EXPECT_EQ(Message(ResponseFrame(",\"error_code\":\"failed\",\"info\":{\"create_settled\":{}}"),
                    Role::kCore),
            "response.info.create_settled: missing members 'request_id', 'sandbox_id', "
            "'native_id', 'generation', 'specification_digest'");
  const std::string settled = std::string("{\"request_id\":\"") + kU1 + "\",\"sandbox_id\":\"" +
                              kU2 + "\",\"native_id\":\"n\",\"generation\":3," +
                              "\"specification_digest\":\"" + std::string(64, 'a') + "\"}";
  const std::string failed = ",\"error_code\":\"failed\",\"info\":{\"create_settled\":";
  EXPECT_EQ(Message(ResponseFrame(failed + settled + "}"), Role::kCore), "decoded");
  const struct {
    std::string from, to, message;
  } settled_cases[] = {
      {"\"request_id\":\"", "\"request_id\":\"x",
       "response.info.create_settled.request_id: not a canonical lowercase uuid"},
      {"\"sandbox_id\":\"", "\"sandbox_id\":\"x",
       "response.info.create_settled.sandbox_id: not a canonical lowercase uuid"},
      {"\"native_id\":\"n\"", "\"native_id\":1",
       "response.info.create_settled.native_id: not a string"},
      {"\"generation\":3", "\"generation\":0",
       "response.info.create_settled.generation: not a positive int64"},
      {"\"specification_digest\":\"", "\"specification_digest\":\"x",
       "response.info.create_settled.specification_digest: not a digest (64 lowercase hex "
       "characters)"},
  };
  for (const auto& c : settled_cases) {
    EXPECT_EQ(Message(ResponseFrame(failed + Edit(settled, c.from, c.to) + "}"), Role::kCore),
              c.message);
  }
  const std::string unsupported = ",\"error_code\":\"unsupported\",\"unsupported\":";
  EXPECT_EQ(Message(ResponseFrame(unsupported + "{}"), Role::kCore),
            "response.unsupported: missing members 'operation', 'reason'");
  EXPECT_EQ(Message(ResponseFrame(unsupported + "{\"operation\":1}"), Role::kCore),
            "response.unsupported.operation: not a string");
  EXPECT_EQ(Message(ResponseFrame(unsupported + "{\"reason\":1}"), Role::kCore),
            "response.unsupported.reason: not a string");
  EXPECT_EQ(Message(ResponseFrame(",\"result\":{},\"error_code\":\"failed\""), Role::kCore),
            "response: result and error_code must not appear together");
  EXPECT_EQ(Message(ResponseFrame(",\"error_code\":\"conflict\",\"info\":{\"create_settled\":" +
                                  settled + "}"),
                    Role::kCore),
            "response: info is allowed only with error_code \"failed\"");
}

TEST(MemberMessagesTest, ResultsListEveryMissingMemberAndCheckEachUnderItsName) {
  EXPECT_EQ(ResultMessage(Operation::kCreate, "{}"),
            "result: missing members 'sandbox_id', 'native_id', 'state'");
  EXPECT_EQ(ResultMessage(Operation::kResume, "{}"),
            "result: missing members 'sandbox_id', 'native_id', 'state'");
  EXPECT_EQ(ResultMessage(Operation::kInspect, "{}"),
            "result: missing members 'sandbox_id', 'state'");
  EXPECT_EQ(ResultMessage(Operation::kInspect, "{\"x\":1}"), "result: unknown member 'x'");
  const std::string sandbox = std::string("{\"sandbox_id\":\"") + kU2 +
                              "\",\"native_id\":\"n\",\"state\":\"retained\"}";
  EXPECT_EQ(ResultMessage(Operation::kCreate, sandbox), "result.state: must be \"running\"");
  EXPECT_EQ(ResultMessage(Operation::kResume, Edit(sandbox, "retained", "absent")),
            "result.state: must be \"running\" or \"retained\"");
  EXPECT_EQ(ResultMessage(Operation::kInspect, Edit(sandbox, "retained", "absent")),
            "result: native_id must be present exactly when state is not \"absent\"");
  EXPECT_EQ(ResultMessage(Operation::kInspect, Edit(sandbox, kU2, "x")),
            "result.sandbox_id: not a canonical lowercase uuid");
  EXPECT_EQ(ResultMessage(Operation::kInspect, Edit(sandbox, "\"n\"", "1")),
            "result.native_id: not a string");
  EXPECT_EQ(ResultMessage(Operation::kInspect, Edit(sandbox, "\"retained\"", "1")),
            "result.state: not a string");

  EXPECT_EQ(ResultMessage(Operation::kExec, "{}"),
            "result: missing members 'exit_code', 'stdout', 'stderr', 'truncated'");
  EXPECT_EQ(ResultMessage(Operation::kExec, "{\"exit_code\":\"0\"}"),
            "result.exit_code: not an int64");
  EXPECT_EQ(ResultMessage(Operation::kExec, "{\"stdout\":1}"), "result.stdout: not a string");
  EXPECT_EQ(ResultMessage(Operation::kExec, "{\"stderr\":1}"), "result.stderr: not a string");
  EXPECT_EQ(ResultMessage(Operation::kExec, "{\"truncated\":1}"),
            "result.truncated: not a boolean");
  EXPECT_EQ(ResultMessage(Operation::kWriteFile, "{}"), "result: missing member 'size'");
  EXPECT_EQ(ResultMessage(Operation::kWriteFile, "{\"size\":-1}"),
            "result.size: out of range [0, 9223372036854775807]");
  EXPECT_EQ(ResultMessage(Operation::kReadFile, "{}"),
            "result: missing members 'content', 'size', 'truncated'");
  EXPECT_EQ(ResultMessage(Operation::kReadFile, "{\"content\":1}"),
            "result.content: not a string");
  EXPECT_EQ(ResultMessage(Operation::kReadFile, "{\"size\":-1}"),
            "result.size: out of range [0, 9223372036854775807]");
  EXPECT_EQ(ResultMessage(Operation::kReadFile, "{\"truncated\":1}"),
            "result.truncated: not a boolean");
  EXPECT_EQ(ResultMessage(Operation::kReadFile,
                          "{\"content\":\"\",\"size\":1,\"truncated\":false}"),
            "result: content, size and truncated disagree");

  EXPECT_EQ(ResultMessage(Operation::kObserve, "{}"),
            "result: missing members 'operation_id', 'state'");
  EXPECT_EQ(ResultMessage(Operation::kObserve, "{\"operation_id\":\"x\"}"),
            "result.operation_id: not a canonical lowercase uuid");
  EXPECT_EQ(ResultMessage(Operation::kObserve, "{\"operation\":1}"),
            "result.operation: not a string");
  EXPECT_EQ(ResultMessage(Operation::kObserve, "{\"state\":\"done\"}"),
            "result.state: not one of \"queued\" | \"running\" | \"completed\" | \"unknown\"");
  EXPECT_EQ(ResultMessage(Operation::kObserve, "{\"response\":[]}"),
            "result.response: not an object");
  const std::string observe = std::string("{\"operation_id\":\"") + kU1 +
                              "\",\"operation\":\"create\",\"state\":\"completed\","
                              "\"response\":{\"id\":\"" + kU1 + "\",\"error_code\":\"capacity\"}}";
  EXPECT_EQ(ResultMessage(Operation::kObserve, observe), "decoded");
  EXPECT_EQ(ResultMessage(Operation::kObserve, Edit(observe, ",\"operation\":\"create\"", "")),
            "result: operation must be present exactly when state is not \"unknown\"");
  EXPECT_EQ(ResultMessage(Operation::kObserve, Edit(observe, "\"completed\"", "\"running\"")),
            "result: response must be present exactly when state is \"completed\"");
  EXPECT_EQ(ResultMessage(Operation::kObserve, Edit(observe, "\"create\"", "\"inspect\"")),
            "result.operation: not a mutation operation");
  EXPECT_EQ(ResultMessage(Operation::kObserve,
                          Edit(observe, "\"error_code\":\"capacity\"", "\"x\":1")),
            "result.response: unknown member 'x'");
  EXPECT_EQ(ResultMessage(Operation::kObserve, Edit(observe, ",\"error_code\":\"capacity\"", "")),
            "result.response: missing member 'result' (a success of an operation with a "
            "result)");
  EXPECT_EQ(ResultMessage(Operation::kObserve,
                          Edit(Edit(observe, "\"create\"", "\"kill\""),
                               "\"error_code\":\"capacity\"", "\"result\":{}")),
            "result.response.result: this operation has no result");
}

TEST(MemberMessagesTest, RecordedResponsesListEveryMissingMemberAndCheckEachUnderItsName) {
  EXPECT_EQ(Message(DecodeRecordedResponse("{}")), "recorded_response: missing member 'id'");
  EXPECT_EQ(Message(DecodeRecordedResponse("{\"x\":1}")),
            "recorded_response: unknown member 'x'");
  EXPECT_EQ(Message(DecodeRecordedResponse("{\"id\":\"x\"}")),
            "recorded_response.id: not a canonical lowercase uuid");
  EXPECT_EQ(Message(DecodeRecordedResponse("{\"result\":[]}")),
            "recorded_response.result: not an object");
  EXPECT_EQ(Message(DecodeRecordedResponse("{\"error_code\":1}")),
            "recorded_response.error_code: not a string");
  EXPECT_EQ(Message(DecodeRecordedResponse("{\"info\":{}}")),
            "recorded_response.info: missing member 'create_settled'");
  EXPECT_EQ(Message(DecodeRecordedResponse("{\"unsupported\":{}}")),
            "recorded_response.unsupported: missing members 'operation', 'reason'");
  const std::string id = std::string("{\"id\":\"") + kU1 + "\"";
  EXPECT_EQ(Message(DecodeRecordedResponse(Operation::kExec, id + "}")),
            "recorded_response: missing member 'result' (a success of an operation with a "
            "result)");
  EXPECT_EQ(Message(DecodeRecordedResponse(id + ",\"result\":{}}")),
            "recorded_response.result: not the result of a mutation");
  EXPECT_EQ(Message(DecodeRecordedResponse(id + ",\"error_code\":\"invalid\",\"unsupported\":" +
                                           "{\"operation\":\"exec\",\"reason\":\"r\"}}")),
            "recorded_response: unsupported is allowed only with error_code \"unsupported\"");
}

}  // namespace
}  // namespace sn::wire

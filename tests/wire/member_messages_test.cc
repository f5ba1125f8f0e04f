// The exact messages of the member rules (missing, unknown, out of range) for every object of the
// control frames (§3) and the HTTP bodies (§6), and which field each member fills: a member
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

}  // namespace
}  // namespace sn::wire

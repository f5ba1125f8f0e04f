// The agent's configuration file: exact members, types and ranges, origins.
#include "agent/state/config.h"

#include "gtest/gtest.h"

namespace sn::agent {
namespace {

// RFC 8032's first test public key.
constexpr char kKey[] = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
constexpr char kMinimal[] =
    R"({"core_origin":"https://core.example","state_dir":"/var/lib/sn","privhelper_socket":"/run/ph.sock",)"
    R"("release_public_key":"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="})";

std::string With(const std::string& extra) {
  std::string s = kMinimal;
  s.insert(s.size() - 1, "," + extra);
  return s;
}

void ExpectErrorNaming(const std::string& json, const std::string& member) {
  absl::StatusOr<AgentConfig> c = ParseConfig(json);
  ASSERT_FALSE(c.ok()) << json;
  EXPECT_TRUE(absl::IsInvalidArgument(c.status()));
  EXPECT_NE(std::string(c.status().message()).find("\"" + member + "\""), std::string::npos)
      << c.status();
}

TEST(ConfigTest, MinimalConfigurationGetsTheDefaults) {
  absl::StatusOr<AgentConfig> c = ParseConfig(kMinimal);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->origin.host, "core.example");
  EXPECT_EQ(c->origin.port, 443);
  EXPECT_TRUE(c->origin.tls);
  EXPECT_FALSE(c->ca_bundle.has_value());
  EXPECT_FALSE(c->insecure_allow_http);
  EXPECT_FALSE(c->generation_management);
  ASSERT_TRUE(c->release_key.has_value());
  EXPECT_EQ(c->release_key->Base64(), kKey);
}

TEST(ConfigTest, EveryOptionalMemberIsRead) {
  absl::StatusOr<AgentConfig> c = ParseConfig(
      R"({"core_origin":"http://127.0.0.1:8080","state_dir":"/s","privhelper_socket":"/p",)"
      R"("release_public_key":"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",)"
      R"("ca_bundle":"/etc/ca.pem","insecure_allow_http":true,"generation_management":true})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->origin.tls);
  EXPECT_EQ(c->origin.port, 8080);
  EXPECT_EQ(c->origin.HostHeader(), "127.0.0.1:8080");
  EXPECT_EQ(*c->ca_bundle, "/etc/ca.pem");
  EXPECT_TRUE(c->generation_management);
}

TEST(ConfigTest, UnknownMemberIsAnErrorNamingIt) {
  ExpectErrorNaming(With(R"("max_actives":3)"), "max_actives");
}

// The limits are privhelper's (its configuration, reported by Probe): the agent's old members
// of those names are refused like any unknown member, whatever their value.
TEST(ConfigTest, CapacityLimitsAreNotAgentMembersAndAreRefusedAsUnknown) {
  for (const char* member : {R"("max_active":16)", R"("max_retained":64)",
                             R"("max_active":"3")", R"("max_retained":0)"}) {
    absl::StatusOr<AgentConfig> c = ParseConfig(With(member));
    ASSERT_FALSE(c.ok()) << member;
    EXPECT_TRUE(absl::IsInvalidArgument(c.status()));
    EXPECT_NE(std::string(c.status().message()).find("unknown member"), std::string::npos)
        << c.status();
  }
  ExpectErrorNaming(With(R"("max_active":16)"), "max_active");
  ExpectErrorNaming(With(R"("max_retained":64)"), "max_retained");
}

TEST(ConfigTest, WrongTypesAreErrorsNamingTheMember) {
  ExpectErrorNaming(With(R"("insecure_allow_http":"yes")"), "insecure_allow_http");
  ExpectErrorNaming(With(R"("generation_management":1)"), "generation_management");
  ExpectErrorNaming(With(R"("ca_bundle":7)"), "ca_bundle");
  ExpectErrorNaming(With(R"("ca_bundle":null)"), "ca_bundle");
  ExpectErrorNaming(std::string(R"({"core_origin":5,"state_dir":"/s","privhelper_socket":"/p",)") +
                        R"("release_public_key":")" + kKey + "\"}",
                    "core_origin");
  ExpectErrorNaming(
      R"({"core_origin":"https://c","state_dir":"/s","privhelper_socket":"/p","release_public_key":7})",
      "release_public_key");
}

TEST(ConfigTest, RequiredMembersMustBePresent) {
  const std::string key = std::string(R"(,"release_public_key":")") + kKey + "\"}";
  ExpectErrorNaming(R"({"state_dir":"/s","privhelper_socket":"/p")" + key, "core_origin");
  ExpectErrorNaming(R"({"core_origin":"https://c","privhelper_socket":"/p")" + key, "state_dir");
  ExpectErrorNaming(R"({"core_origin":"https://c","state_dir":"/s")" + key, "privhelper_socket");
  ExpectErrorNaming(R"({"core_origin":"https://c","state_dir":"/s","privhelper_socket":"/p"})",
                    "release_public_key");
}

TEST(ConfigTest, ReleaseKeyMustBeCanonicalBase64OfThirtyTwoBytes) {
  const std::string base =
      R"({"core_origin":"https://c","state_dir":"/s","privhelper_socket":"/p","release_public_key":)";
  for (const char* bad : {R"("")", R"("abc")", R"(7)",
                          // 31 bytes, 33 bytes, and the key without its padding
                          R"("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHUQ==")",
                          R"("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURoA")",
                          R"("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo")"}) {
    ExpectErrorNaming(base + bad + "}", "release_public_key");
  }
}

TEST(ConfigTest, RelativePathsAreRefused) {
  ExpectErrorNaming(
      std::string(R"({"core_origin":"https://c","state_dir":"s","privhelper_socket":"/p",)") +
          R"("release_public_key":")" + kKey + "\"}",
      "state_dir");
}

TEST(ConfigTest, HttpOriginNeedsInsecureAllowHttp) {
  ExpectErrorNaming(
      std::string(R"({"core_origin":"http://c","state_dir":"/s","privhelper_socket":"/p",)") +
          R"("release_public_key":")" + kKey + "\"}",
      "core_origin");
}

// The trusted configuration is read by the one strict record reader (common/json/record.h): a
// member named twice is refused and named, never resolved to one of its values.
TEST(ConfigTest, AMemberNamedTwiceIsRefusedAndNamed) {
  absl::StatusOr<AgentConfig> c =
      ParseConfig(With(R"("core_origin":"https://other.example")"));
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(c.status()));
  EXPECT_NE(std::string(c.status().message()).find("duplicate member 'core_origin'"),
            std::string::npos)
      << c.status();
}

TEST(ConfigTest, NotJsonOrNotAnObjectIsAnError) {
  EXPECT_FALSE(ParseConfig("{").ok());
  EXPECT_FALSE(ParseConfig("[]").ok());
}

TEST(ConfigTest, MetricsListenOnAUnixSocketOrALiteralLoopbackAddress) {
  absl::StatusOr<AgentConfig> c = ParseConfig(With(R"("metrics":"/run/sandbox-node/metrics.sock")"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metrics, (MetricsListen{"/run/sandbox-node/metrics.sock", "", 0}));
  c = ParseConfig(With(R"("metrics":"127.0.0.1:9465")"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metrics, (MetricsListen{"", "127.0.0.1", 9465}));
  c = ParseConfig(With(R"("metrics":"[::1]:9465")"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metrics, (MetricsListen{"", "::1", 9465}));
  EXPECT_FALSE(ParseConfig(kMinimal)->metrics.has_value());
  // Remote only when asked for; never a host name; ports in range; a path a socket can have.
  ExpectErrorNaming(With(R"("metrics":"10.0.0.1:9465")"), "metrics");
  c = ParseConfig(With(R"("metrics":"10.0.0.1:9465","metrics_allow_remote":true)"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metrics->ip, "10.0.0.1");
  ExpectErrorNaming(With(R"("metrics":"localhost:9465")"), "metrics");
  ExpectErrorNaming(With(R"("metrics":"::1:9465")"), "metrics");
  ExpectErrorNaming(With(R"("metrics":"127.0.0.1:65536")"), "metrics");
  ExpectErrorNaming(With(R"("metrics":"127.0.0.1")"), "metrics");
  ExpectErrorNaming(With(R"("metrics":"relative/metrics.sock")"), "metrics");
  ExpectErrorNaming(With("\"metrics\":\"/" + std::string(107, 'a') + "\""), "metrics");
  ExpectErrorNaming(With(R"("metrics_allow_remote":true)"), "metrics_allow_remote");
}

TEST(ConfigTest, OperationRecordMaxIsAnIntegerInItsRange) {
  EXPECT_EQ(ParseConfig(kMinimal)->operation_record_max, 262144u);
  absl::StatusOr<AgentConfig> c = ParseConfig(With(R"("operation_record_max":1048576)"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->operation_record_max, 1048576u);
  EXPECT_EQ(ParseConfig(With(R"("operation_record_max":1024)"))->operation_record_max, 1024u);
  ExpectErrorNaming(With(R"("operation_record_max":1023)"), "operation_record_max");
  ExpectErrorNaming(With(R"("operation_record_max":4194305)"), "operation_record_max");
  ExpectErrorNaming(With(R"("operation_record_max":-1)"), "operation_record_max");
  ExpectErrorNaming(With(R"("operation_record_max":2048.5)"), "operation_record_max");
  ExpectErrorNaming(With(R"("operation_record_max":"2048")"), "operation_record_max");
}

TEST(OriginTest, AcceptsHostPortAndIpv6) {
  absl::StatusOr<Origin> o = ParseOrigin("https://[::1]:8443/", false);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->host, "::1");
  EXPECT_EQ(o->port, 8443);
  EXPECT_EQ(o->text, "https://[::1]:8443");
  EXPECT_EQ(o->HostHeader(), "[::1]:8443");
}

TEST(OriginTest, RefusesPathsQueriesUserInfoAndBadPorts) {
  for (const char* bad : {"https://c/x", "https://c?q", "https://u@c", "https://c:0",
                          "https://c:70000", "https://c:", "ftp://c", "https://", "c"}) {
    EXPECT_FALSE(ParseOrigin(bad, true).ok()) << bad;
  }
}

}  // namespace
}  // namespace sn::agent

#include "privhelper/config.h"

#include <string>

#include "gtest/gtest.h"

namespace sn::privhelper {
namespace {

constexpr char kValid[] =
    R"({"socket":"/run/sn/privhelper.sock","agent_uid":1000,"state_dir":"/var/lib/sn/ph",)"
    R"("provider":"docker"})";

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(ConfigTest, ValidConfigWithDefaultDockerSocket) {
  absl::StatusOr<Config> c = ParseConfig(kValid);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->socket, "/run/sn/privhelper.sock");
  EXPECT_EQ(c->agent_uid, 1000u);
  EXPECT_EQ(c->state_dir, "/var/lib/sn/ph");
  EXPECT_EQ(c->provider, "docker");
  EXPECT_EQ(c->docker_socket, "/var/run/docker.sock");
}

TEST(ConfigTest, ExplicitDockerSocketIsUsed) {
  absl::StatusOr<Config> c = ParseConfig(
      R"({"socket":"/s","agent_uid":0,"state_dir":"/d","provider":"docker","docker_socket":"/x/d.sock"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->docker_socket, "/x/d.sock");
  EXPECT_EQ(c->agent_uid, 0u);
}

TEST(ConfigTest, UnknownMemberIsRejectedByName) {
  absl::StatusOr<Config> c = ParseConfig(
      R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","Socket":"/t"})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(c.status()).find("\"Socket\""), std::string::npos) << c.status();
  EXPECT_NE(Message(c.status()).find("unknown"), std::string::npos) << c.status();
}

TEST(ConfigTest, MissingMemberIsRejectedByName) {
  absl::StatusOr<Config> c = ParseConfig(R"({"socket":"/s","agent_uid":1,"provider":"docker"})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(Message(c.status()).find("\"state_dir\""), std::string::npos) << c.status();
}

struct WrongType {
  const char* json;
  const char* member;
};

class ConfigWrongTypeTest : public ::testing::TestWithParam<WrongType> {};

TEST_P(ConfigWrongTypeTest, WrongTypeOrValueIsRejectedNamingTheMember) {
  absl::StatusOr<Config> c = ParseConfig(GetParam().json);
  ASSERT_FALSE(c.ok()) << GetParam().json;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(c.status()).find(std::string("\"") + GetParam().member + "\""),
            std::string::npos)
      << c.status();
}

INSTANTIATE_TEST_SUITE_P(
    Members, ConfigWrongTypeTest,
    ::testing::Values(
        WrongType{R"({"socket":"/s","agent_uid":"1000","state_dir":"/d","provider":"docker"})", "agent_uid"},
        WrongType{R"({"socket":"/s","agent_uid":1000.0,"state_dir":"/d","provider":"docker"})", "agent_uid"},
        WrongType{R"({"socket":"/s","agent_uid":-1,"state_dir":"/d","provider":"docker"})", "agent_uid"},
        WrongType{R"({"socket":"/s","agent_uid":4294967295,"state_dir":"/d","provider":"docker"})", "agent_uid"},
        WrongType{R"({"socket":"/s","agent_uid":null,"state_dir":"/d","provider":"docker"})", "agent_uid"},
        WrongType{R"({"socket":5,"agent_uid":1,"state_dir":"/d","provider":"docker"})", "socket"},
        WrongType{R"({"socket":"rel/s","agent_uid":1,"state_dir":"/d","provider":"docker"})", "socket"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":["/d"],"provider":"docker"})", "state_dir"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"podman"})", "provider"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":true})", "provider"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","docker_socket":null})", "docker_socket"}));

TEST(ConfigTest, OverlongSocketPathIsRejected) {
  std::string path = "/" + std::string(120, 'a');
  absl::StatusOr<Config> c = ParseConfig(R"({"socket":")" + path +
                                         R"(","agent_uid":1,"state_dir":"/d","provider":"docker"})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(Message(c.status()).find("\"socket\""), std::string::npos) << c.status();
}

TEST(ConfigTest, NonObjectAndInvalidJsonAreRejected) {
  EXPECT_FALSE(ParseConfig("[]").ok());
  EXPECT_FALSE(ParseConfig("{").ok());
  EXPECT_FALSE(ParseConfig("").ok());
}

TEST(ConfigTest, MissingFileIsNotFound) {
  absl::StatusOr<Config> c = LoadConfig("/nonexistent/privhelper.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sn::privhelper

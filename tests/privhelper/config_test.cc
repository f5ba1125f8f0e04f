#include "privhelper/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper {
namespace {

constexpr char kValid[] =
    R"({"socket":"/run/sn/privhelper.sock","agent_uid":1000,"state_dir":"/var/lib/sn/ph",)"
    R"("provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})";

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

TEST(ConfigTest, ReleasePublicKeyIsRequiredAndMustBeAnEd25519Key) {
  EXPECT_EQ(ParseConfig(R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker"})")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Config> c = ParseConfig(
      R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker",)"
      R"("release_public_key":"AAAA"})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(Message(c.status()).find("release_public_key"), std::string::npos);
  c = ParseConfig(kValid);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->release_public_key, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
}

TEST(ConfigTest, MaxGenerationsDefaultsTo64AndTakesTheBounds) {
  const std::string base = R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")";
  absl::StatusOr<Config> c = ParseConfig(base + "}");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_generations, 64);
  for (int64_t n : {2, 4096}) {
    c = ParseConfig(base + R"(,"max_generations":)" + std::to_string(n) + "}");
    ASSERT_TRUE(c.ok()) << n << ": " << c.status();
    EXPECT_EQ(c->max_generations, n);
  }
}

TEST(ConfigTest, ExplicitDockerSocketIsUsed) {
  absl::StatusOr<Config> c = ParseConfig(
      R"({"socket":"/s","agent_uid":0,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","docker_socket":"/x/d.sock"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->docker_socket, "/x/d.sock");
  EXPECT_EQ(c->agent_uid, 0u);
}

TEST(ConfigTest, UnknownMemberIsRejectedByName) {
  absl::StatusOr<Config> c = ParseConfig(
      R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","Socket":"/t"})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(c.status()).find("\"Socket\""), std::string::npos) << c.status();
  EXPECT_NE(Message(c.status()).find("unknown"), std::string::npos) << c.status();
}

// The trusted configuration is read with the durable records' strict reader: a member named
// twice is refused by name, whichever value either copy has (nlohmann kept the last one).
TEST(ConfigTest, DuplicatedMemberIsRefusedByName) {
  for (const char* twice :
       {R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","socket":"/t"})",
        R"({"socket":"/s","agent_uid":1,"agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})",
        R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","max_generations":8,"max_generations":9})"}) {
    absl::StatusOr<Config> c = ParseConfig(twice);
    ASSERT_FALSE(c.ok()) << twice;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(Message(c.status()).find("duplicate member"), std::string::npos) << c.status();
  }
  absl::StatusOr<Config> c = ParseConfig(
      R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","state_dir":"/e"})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(Message(c.status()).find("'state_dir'"), std::string::npos) << c.status();
}

TEST(ConfigTest, MissingMemberIsRejectedByName) {
  absl::StatusOr<Config> c = ParseConfig(R"({"socket":"/s","agent_uid":1,"provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})");
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
        WrongType{R"({"socket":"/s","agent_uid":"1000","state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})", "agent_uid"},
        WrongType{R"({"socket":"/s","agent_uid":1000.0,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})", "agent_uid"},
        WrongType{R"({"socket":"/s","agent_uid":-1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})", "agent_uid"},
        WrongType{R"({"socket":"/s","agent_uid":4294967295,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})", "agent_uid"},
        WrongType{R"({"socket":"/s","agent_uid":null,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})", "agent_uid"},
        WrongType{R"({"socket":5,"agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})", "socket"},
        WrongType{R"({"socket":"rel/s","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})", "socket"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":["/d"],"provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})", "state_dir"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"podman","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})", "provider"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":true,"release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})", "provider"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","docker_socket":null})", "docker_socket"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","max_generations":1})", "max_generations"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","max_generations":4097})", "max_generations"},
        WrongType{R"({"socket":"/s","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","max_generations":"64"})", "max_generations"}));

TEST(ConfigTest, OverlongSocketPathIsRejected) {
  std::string path = "/" + std::string(120, 'a');
  absl::StatusOr<Config> c = ParseConfig(R"({"socket":")" + path +
                                         R"(","agent_uid":1,"state_dir":"/d","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})");
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

// The config file is privhelper's trust anchor (finding 10): only root may have written it.
class ConfigFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, mode_t mode, const std::string& text = kValid) {
    std::string path = dir_.File(name);
    { std::ofstream(path) << text; }
    EXPECT_EQ(chmod(path.c_str(), mode), 0);
    return path;
  }
  // Refused at start-up with a message naming the file and the reason.
  void ExpectRefused(const std::string& path, const std::string& named,
                     const std::string& reason) {
    absl::StatusOr<Config> c = LoadConfig(path);
    ASSERT_FALSE(c.ok()) << path << " was accepted";
    EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
    EXPECT_NE(Message(c.status()).find("config file"), std::string::npos) << c.status();
    EXPECT_NE(Message(c.status()).find(named + ":"), std::string::npos) << c.status();
    EXPECT_NE(Message(c.status()).find(reason), std::string::npos) << c.status();
  }
  sn::testing::ShortTempDir dir_;
};

TEST_F(ConfigFileTest, OwnFileNotWritableByOthersIsLoaded) {
  absl::StatusOr<Config> c = LoadConfig(Write("c.json", 0644));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->agent_uid, 1000u);
}

TEST_F(ConfigFileTest, SymlinkedConfigIsRefused) {
  std::string target = Write("real.json", 0644);
  ASSERT_EQ(symlink(target.c_str(), dir_.File("c.json").c_str()), 0);
  ExpectRefused(dir_.File("c.json"), dir_.File("c.json"), "symbolic link");
}

TEST_F(ConfigFileTest, GroupWritableConfigIsRefused) {
  ExpectRefused(Write("c.json", 0664), dir_.File("c.json"),
                "writable by group or others (mode 0664)");
}

TEST_F(ConfigFileTest, WorldWritableConfigIsRefused) {
  ExpectRefused(Write("c.json", 0646), dir_.File("c.json"),
                "writable by group or others (mode 0646)");
}

TEST_F(ConfigFileTest, ConfigOwnedByAnotherUidIsRefused) {
  SN_REQUIRE_ROOT();
  std::string path = Write("c.json", 0644);
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  ExpectRefused(path, path, "owned by uid 65534");
}

// A directory the agent owns would let it replace the file (or the path to it).
TEST_F(ConfigFileTest, ConfigInADirectoryAnotherUidOwnsIsRefused) {
  SN_REQUIRE_ROOT();
  ASSERT_EQ(mkdir(dir_.File("etc").c_str(), 0755), 0);
  std::string path = Write("etc/c.json", 0644);
  ASSERT_EQ(chown(dir_.File("etc").c_str(), 65534, 65534), 0);
  ExpectRefused(path, dir_.File("etc"), "owned by uid 65534");
}

// O_NONBLOCK: a FIFO planted at the path cannot hang start-up waiting for a writer.
TEST_F(ConfigFileTest, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(mkfifo(dir_.File("c.json").c_str(), 0644), 0);
  ExpectRefused(dir_.File("c.json"), dir_.File("c.json"), "is a FIFO, not a regular file");
}

TEST_F(ConfigFileTest, ConfigLargerThanTheBoundIsRefused) {
  std::string big = std::string(kValid).substr(0, sizeof kValid - 2) + "," +
                    std::string(kMaxConfigBytes, ' ') + "}";
  absl::StatusOr<Config> c = LoadConfig(Write("c.json", 0644, big));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(Message(c.status()).find("larger than 65536 bytes"), std::string::npos)
      << c.status();
}

// The microvm object: required with provider "microvm", refused with any other, every member
// checked and named as "microvm.<member>".
constexpr char kMicrovmBase[] =
    R"({"socket":"/s","agent_uid":1000,"state_dir":"/d","provider":"microvm",)"
    R"("release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","microvm":)";

absl::StatusOr<Config> Microvm(const std::string& object) {
  return ParseConfig(kMicrovmBase + object + "}");
}

TEST(MicrovmConfigTest, RequiredMembersAndDefaults) {
  absl::StatusOr<Config> c = Microvm(R"({"store_dir":"/var/lib/sn/vm","vm_uid":997,"vm_gid":996})");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->microvm.has_value());
  EXPECT_EQ(c->provider, "microvm");
  EXPECT_EQ(c->microvm->accel, "auto");
  EXPECT_EQ(c->microvm->store_dir, "/var/lib/sn/vm");
  EXPECT_EQ(c->microvm->vm_uid, 997u);
  EXPECT_EQ(c->microvm->vm_gid, 996u);
  EXPECT_EQ(c->microvm->disk_bytes, int64_t{1} << 30);
  EXPECT_EQ(c->microvm->free_space_floor_bytes, int64_t{1} << 30);
  EXPECT_EQ(c->microvm->qemu, "/usr/bin/qemu-system-x86_64");
  EXPECT_EQ(c->microvm->qemu_img, "/usr/bin/qemu-img");

  c = Microvm(R"({"store_dir":"/v","vm_uid":997,"vm_gid":996,"accel":"tcg","disk_bytes":67108864,)"
              R"("free_space_floor_bytes":0,"qemu":"/opt/q","qemu_img":"/opt/qi"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->microvm->accel, "tcg");
  EXPECT_EQ(c->microvm->disk_bytes, int64_t{64} << 20);
  EXPECT_EQ(c->microvm->free_space_floor_bytes, 0);
  EXPECT_EQ(c->microvm->qemu, "/opt/q");
  EXPECT_EQ(c->microvm->qemu_img, "/opt/qi");

  // A Docker configuration has no microvm settings.
  c = ParseConfig(kValid);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->microvm.has_value());
}

TEST(MicrovmConfigTest, TheObjectBelongsToItsProviderOnly) {
  absl::StatusOr<Config> c = ParseConfig(
      R"({"socket":"/s","agent_uid":1000,"state_dir":"/d","provider":"microvm",)"
      R"("release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(Message(c.status()).find("\"microvm\": missing"), std::string::npos) << c.status();
  c = ParseConfig(
      R"({"socket":"/s","agent_uid":1000,"state_dir":"/d","provider":"docker",)"
      R"("release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",)"
      R"("microvm":{"store_dir":"/v","vm_uid":997,"vm_gid":996}})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(Message(c.status()).find("only with provider"), std::string::npos) << c.status();
  c = Microvm("[]");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(Message(c.status()).find("\"microvm\": must be an object"), std::string::npos)
      << c.status();
}

struct BadMicrovm {
  const char* object;
  const char* named;  // the member the error names, as "microvm.<member>"
};

class MicrovmMemberTest : public ::testing::TestWithParam<BadMicrovm> {};

TEST_P(MicrovmMemberTest, EachBadMemberIsRefusedByItsName) {
  absl::StatusOr<Config> c = Microvm(GetParam().object);
  ASSERT_FALSE(c.ok()) << GetParam().object;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(c.status()).find(std::string("\"microvm.") + GetParam().named + "\""),
            std::string::npos)
      << c.status();
}

INSTANTIATE_TEST_SUITE_P(
    Members, MicrovmMemberTest,
    ::testing::Values(
        BadMicrovm{R"({"vm_uid":997,"vm_gid":996})", "store_dir"},
        BadMicrovm{R"({"store_dir":"/v","vm_gid":996})", "vm_uid"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":997})", "vm_gid"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":997,"vm_gid":996,"kernel":"/k"})", "kernel"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":997,"vm_gid":996,"accel":"hvf"})", "accel"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":997,"vm_gid":996,"accel":1})", "accel"},
        BadMicrovm{R"({"store_dir":"v","vm_uid":997,"vm_gid":996})", "store_dir"},
        // 52 bytes: the channel socket STORE/vms/<uuid>/run/agent.sock would pass 107.
        BadMicrovm{R"({"store_dir":"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","vm_uid":997,"vm_gid":996})", "store_dir"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":0,"vm_gid":996})", "vm_uid"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":997,"vm_gid":0})", "vm_uid"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":1000,"vm_gid":996})", "vm_uid"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":-1,"vm_gid":996})", "vm_uid"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":"997","vm_gid":996})", "vm_uid"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":997,"vm_gid":996,"disk_bytes":1048576})", "disk_bytes"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":997,"vm_gid":996,"disk_bytes":1.5e9})", "disk_bytes"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":997,"vm_gid":996,"free_space_floor_bytes":-1})", "free_space_floor_bytes"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":997,"vm_gid":996,"qemu":"qemu"})", "qemu"},
        BadMicrovm{R"({"store_dir":"/v","vm_uid":997,"vm_gid":996,"qemu_img":null})", "qemu_img"}));

TEST(MicrovmConfigTest, AStoreDirOfTheLongestAllowedLengthIsTaken) {
  const std::string dir = "/" + std::string(kMaxMicrovmStoreDir - 1, 'a');
  absl::StatusOr<Config> c =
      Microvm(R"({"store_dir":")" + dir + R"(","vm_uid":997,"vm_gid":996})");
  ASSERT_TRUE(c.ok()) << c.status();
  // One byte more is refused, naming the member.
  absl::StatusOr<Config> longer =
      Microvm(R"({"store_dir":")" + dir + R"(a","vm_uid":997,"vm_gid":996})");
  ASSERT_FALSE(longer.ok());
  EXPECT_NE(longer.status().message().find("store_dir"), std::string::npos) << longer.status();
  // The longest socket: the boot probe's STORE/probe/vms/<uuid>/agent.sock.
  EXPECT_EQ(c->microvm->store_dir.size() + (sizeof("/probe/vms/") - 1) + 36 +
                (sizeof("/agent.sock") - 1),
            107u);
}

TEST(MicrovmConfigTest, AMemberNamedTwiceInsideTheObjectIsRefused) {
  absl::StatusOr<Config> c =
      Microvm(R"({"store_dir":"/v","vm_uid":997,"vm_uid":998,"vm_gid":996})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(Message(c.status()).find("vm_uid"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace sn::privhelper

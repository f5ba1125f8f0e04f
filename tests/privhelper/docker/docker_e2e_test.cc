// The probe against the real dockerd on /var/run/docker.sock. Skips loudly when dockerd is not
// running, fails instead under CI=true. The test never starts dockerd itself.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/probe.h"
#include "privhelper/docker/docker_provider.h"
#include "privhelper/rpc/server.h"
#include "proto/privhelper.grpc.pb.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper {
namespace {

constexpr char kDockerSocket[] = "/var/run/docker.sock";
namespace pb = ::sn::privhelper::v1;
using ::sn::docker::DockerProvider;
using ::sn::docker::kMaxFingerprintBytes;
using ::sn::docker::ProbeDocker;

std::unique_ptr<PrivHelperServer> StartWithDocker(const std::string& path,
                                                  const std::string& docker_socket) {
  ServerOptions o;
  o.socket_path = path;
  o.agent_uid = geteuid();
  auto provider = std::make_unique<DockerProvider>(
      std::make_unique<docker::BeastDockerEngine>(docker_socket), "0000aaaa-0000-4000-8000-0000000000aa");
  absl::StatusOr<std::unique_ptr<PrivHelperServer>> s = PrivHelperServer::Start(o, std::move(provider));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

grpc::Status CallProbe(const std::string& path, pb::ProbeResponse* resp) {
  auto stub = pb::PrivHelper::NewStub(
      grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  pb::ProbeRequest req;
  req.set_generation(1);
  return stub->Probe(&ctx, req, resp);
}

bool DockerAnswers(std::string* why) {
  docker::BeastDockerEngine engine(kDockerSocket);
  absl::StatusOr<docker::HttpResponse> ping = engine.Request("GET", "/_ping", "", {});
  if (ping.ok() && ping->status == 200) return true;
  *why = ping.ok() ? "status " + std::to_string(ping->status) : std::string(ping.status().message());
  return false;
}

#define SN_REQUIRE_DOCKERD()                                                              \
  do {                                                                                    \
    std::string why;                                                                      \
    if (!DockerAnswers(&why)) {                                                           \
      if (sn::testing::InCi()) FAIL() << "dockerd not answering (CI=true): " << why;      \
      GTEST_SKIP() << "SKIPPED LOUDLY: dockerd not answering on " << kDockerSocket << ": " \
                   << why;                                                                \
    }                                                                                     \
  } while (0)

TEST(DockerE2eTest, ProbeRpcThroughPrivhelperIsReadyOnTheRealDaemon) {
  SN_REQUIRE_DOCKERD();
  sn::testing::ShortTempDir dir;
  auto server = StartWithDocker(dir.File("ph.sock"), kDockerSocket);
  ASSERT_NE(server, nullptr);
  pb::ProbeResponse resp;
  grpc::Status s = CallProbe(dir.File("ph.sock"), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(resp.ready());
  EXPECT_EQ(resp.diagnostic(), pb::DIAGNOSTIC_UNSPECIFIED);
  EXPECT_EQ(resp.provider(), "docker");
  EXPECT_EQ(resp.backend_fingerprint().rfind("docker/", 0), 0u) << resp.backend_fingerprint();
}

TEST(DockerE2eTest, ProbeRpcWithMissingDaemonSocketIsDaemonUnreachableWithoutPaths) {
  sn::testing::ShortTempDir dir;
  auto server = StartWithDocker(dir.File("ph.sock"), dir.File("no-docker.sock"));
  ASSERT_NE(server, nullptr);
  pb::ProbeResponse resp;
  grpc::Status s = CallProbe(dir.File("ph.sock"), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(resp.ready());
  EXPECT_EQ(resp.diagnostic(), pb::DAEMON_UNREACHABLE);
  EXPECT_EQ(resp.backend_fingerprint(), "");
  // Nothing but the code crosses: no path or error text anywhere in the response.
  EXPECT_EQ(resp.SerializeAsString().find(dir.path()), std::string::npos);
}

TEST(DockerE2eTest, RealDaemonIsReadyWithDockerFingerprint) {
  SN_REQUIRE_DOCKERD();
  docker::BeastDockerEngine engine(kDockerSocket);
  ProbeResult r = ProbeDocker(engine);
  EXPECT_TRUE(r.ready);
  EXPECT_FALSE(r.diagnostic.has_value());
  EXPECT_EQ(r.fingerprint.rfind("docker/", 0), 0u) << r.fingerprint;
  // "docker/<Version> <Driver> <CgroupDriver>": three space-separated fields.
  EXPECT_EQ(std::count(r.fingerprint.begin(), r.fingerprint.end(), ' '), 2) << r.fingerprint;
  EXPECT_LE(r.fingerprint.size(), kMaxFingerprintBytes);
}

}  // namespace
}  // namespace sn::privhelper

// The privhelper executable: configuration errors at start-up, then Probe and Execute over its
// socket (with a missing Docker socket, so no dockerd is needed), and a clean SIGTERM exit.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/privhelper.grpc.pb.h"
#include "tests/privhelper/test_util.h"

extern char** environ;

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;

std::string Runfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  return (srcdir && ws) ? std::string(srcdir) + "/" + ws + "/" + rel : rel;
}

// Starts privhelper with `config`; its stderr goes to `err_path`.
pid_t Start(const std::string& config, const std::string& err_path) {
  std::string bin = Runfile("privhelper/privhelper");
  std::string flag = "--config=" + config;
  std::vector<char*> argv = {bin.data(), flag.data(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  if (posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(PrivhelperBinaryTest, UnknownConfigMemberStopsStartupNamingIt) {
  sn::testing::ShortTempDir dir;
  std::ofstream(dir.File("c.json"))
      << R"({"socket":")" << dir.File("ph.sock") << R"(","agent_uid":0,"state_dir":")"
      << dir.File("state") << R"(","provider":"docker","sockets":1})";
  pid_t pid = Start(dir.File("c.json"), dir.File("err"));
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitExit(pid), 2);
  EXPECT_NE(Slurp(dir.File("err")).find("sockets"), std::string::npos) << Slurp(dir.File("err"));
}

TEST(PrivhelperBinaryTest, ServesProbeAndExecuteThenExitsCleanlyOnSigterm) {
  sn::testing::ShortTempDir dir;
  std::ofstream(dir.File("c.json"))
      << R"({"socket":")" << dir.File("ph.sock") << R"(","agent_uid":)" << geteuid()
      << R"(,"state_dir":")" << dir.File("state") << R"(","provider":"docker","docker_socket":")"
      << dir.File("no-docker.sock") << R"("})";
  pid_t pid = Start(dir.File("c.json"), dir.File("err"));
  ASSERT_GT(pid, 0);

  auto channel = grpc::CreateChannel("unix:" + dir.File("ph.sock"), grpc::InsecureChannelCredentials());
  // gRPC retries the connection until the socket exists (bounded by the deadline).
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(30)))
      << Slurp(dir.File("err"));
  auto stub = pb::PrivHelper::NewStub(channel);
  std::string installation;
  {
    grpc::ClientContext ctx;
    pb::ProbeRequest req;
    req.set_generation(1);
    pb::ProbeResponse resp;
    ASSERT_TRUE(stub->Probe(&ctx, req, &resp).ok());
    EXPECT_FALSE(resp.ready());
    EXPECT_EQ(resp.diagnostic(), pb::DAEMON_UNREACHABLE);
    // privhelper created and owns the installation identity, and reports it.
    EXPECT_EQ(resp.installation_id().size(), 36u);
    std::string stored = Slurp(dir.File("state/installation.json"));
    EXPECT_NE(stored.find(resp.installation_id()), std::string::npos) << stored;
    installation = resp.installation_id();
  }
  {
    // A caller naming another installation is refused before any native I/O.
    grpc::ClientContext ctx;
    pb::ExecuteRequest req;
    req.set_request_id("0000cccc-0000-4000-8000-000000000002");
    req.set_generation(1);
    req.set_budget_ms(10000);
    req.set_installation_id("0000aaaa-0000-4000-8000-0000000000ff");
    req.mutable_inspect()->set_sandbox_id("0000dddd-0000-4000-8000-000000000001");
    pb::ExecuteResponse resp;
    EXPECT_EQ(stub->Execute(&ctx, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    grpc::ClientContext ctx;
    pb::ExecuteRequest req;
    req.set_request_id("0000cccc-0000-4000-8000-000000000001");
    req.set_generation(1);
    req.set_budget_ms(10000);
    req.set_installation_id(installation);
    req.mutable_inspect()->set_sandbox_id("0000dddd-0000-4000-8000-000000000001");
    pb::ExecuteResponse resp;
    grpc::Status s = stub->Execute(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << Slurp(dir.File("err"));
    // The helper ran (beside the executable) and could not list: doubt, never absence.
    EXPECT_EQ(resp.error_code(), pb::ERROR_CODE_UNAVAILABLE);
  }
  struct stat st {};
  ASSERT_EQ(stat(dir.File("state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid), 0) << Slurp(dir.File("err"));
  EXPECT_NE(stat(dir.File("ph.sock").c_str(), &st), 0);  // the socket is removed
  EXPECT_NE(Slurp(dir.File("err")).find("native helper exited"), std::string::npos)
      << Slurp(dir.File("err"));
}

}  // namespace
}  // namespace sn::privhelper

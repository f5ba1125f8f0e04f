// The Beast engine and the probe over real unix sockets: missing, refusing, forbidden,
// failing and silent daemons.
#include "privhelper/docker/beast_engine.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fcntl.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "privhelper/docker/probe.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper {
namespace {

using docker::BeastDockerEngine;
using docker::GetTransportFailure;
using docker::ProbeDocker;
using docker::TransportFailure;
using sn::testing::CannedHttpServer;
using sn::testing::ShortTempDir;

// A bound unix socket nobody accepts on after close: connect() gets ECONNREFUSED.
void MakeStaleSocket(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  close(fd);
}

TEST(BeastEngineTest, MissingSocketIsSocketMissingAndDaemonUnreachable) {
  ShortTempDir dir;
  BeastDockerEngine engine(dir.File("nope.sock"));
  absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/_ping", "", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(GetTransportFailure(r.status()), TransportFailure::kSocketMissing);
  ProbeResult p = ProbeDocker(engine);
  EXPECT_FALSE(p.ready);
  EXPECT_EQ(p.diagnostic, Diagnostic::kDaemonUnreachable);
}

TEST(BeastEngineTest, StaleSocketIsConnectionRefusedAndDaemonUnreachable) {
  ShortTempDir dir;
  MakeStaleSocket(dir.File("stale.sock"));
  BeastDockerEngine engine(dir.File("stale.sock"));
  absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/_ping", "", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(GetTransportFailure(r.status()), TransportFailure::kConnectionRefused);
  EXPECT_EQ(ProbeDocker(engine).diagnostic, Diagnostic::kDaemonUnreachable);
}

TEST(BeastEngineTest, ServerError500IsProviderUnavailable) {
  ShortTempDir dir;
  CannedHttpServer server(dir.File("d.sock"),
                          "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                          "Content-Length: 18\r\nConnection: close\r\n\r\n{\"message\":\"boom\"}");
  BeastDockerEngine engine(dir.File("d.sock"));
  absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/_ping", "", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->body, "{\"message\":\"boom\"}");
  EXPECT_EQ(r->content_type, "application/json");
  ProbeResult p = ProbeDocker(engine);
  EXPECT_FALSE(p.ready);
  EXPECT_EQ(p.diagnostic, Diagnostic::kProviderUnavailable);
}

TEST(BeastEngineTest, GarbageAnswerIsMalformedAndProviderUnavailable) {
  ShortTempDir dir;
  CannedHttpServer server(dir.File("d.sock"), "SSH-2.0-OpenSSH\r\n\r\n");
  BeastDockerEngine engine(dir.File("d.sock"));
  absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/_ping", "", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(GetTransportFailure(r.status()), TransportFailure::kMalformedResponse) << r.status();
  EXPECT_EQ(ProbeDocker(engine).diagnostic, Diagnostic::kProviderUnavailable);
}

TEST(BeastEngineTest, OversizedBodyIsResponseTooLarge) {
  ShortTempDir dir;
  CannedHttpServer server(dir.File("d.sock"),
                          "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x'));
  BeastDockerEngine engine(dir.File("d.sock"));
  docker::RequestOptions opts;
  opts.max_response_bytes = 10;
  absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/info", "", opts);
  ASSERT_FALSE(r.ok()) << r->status << " " << r->body.size();
  EXPECT_EQ(GetTransportFailure(r.status()), TransportFailure::kResponseTooLarge) << r.status();
}

TEST(BeastEngineTest, OversizedChunkedBodyIsResponseTooLarge) {
  ShortTempDir dir;
  CannedHttpServer server(dir.File("d.sock"),
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "8\r\nabcdefgh\r\n8\r\nabcdefgh\r\n0\r\n\r\n");
  BeastDockerEngine engine(dir.File("d.sock"));
  docker::RequestOptions opts;
  opts.max_response_bytes = 10;
  absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/info", "", opts);
  ASSERT_FALSE(r.ok()) << r->status << " " << r->body.size();
  EXPECT_EQ(GetTransportFailure(r.status()), TransportFailure::kResponseTooLarge) << r.status();
}

TEST(BeastEngineTest, SilentDaemonTimesOutWithinTheDeadline) {
  ShortTempDir dir;
  CannedHttpServer server(dir.File("d.sock"), "");
  BeastDockerEngine engine(dir.File("d.sock"));
  docker::RequestOptions opts;
  opts.timeout = absl::Milliseconds(100);
  absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/_ping", "", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(GetTransportFailure(r.status()), TransportFailure::kTimeout) << r.status();
  EXPECT_EQ(ProbeDocker(engine, absl::Milliseconds(100)).diagnostic,
            Diagnostic::kProviderUnavailable);
}

TEST(BeastEngineTest, ChunkedAnswerIsReassembled) {
  ShortTempDir dir;
  CannedHttpServer server(dir.File("d.sock"),
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  BeastDockerEngine engine(dir.File("d.sock"));
  absl::StatusOr<docker::HttpResponse> r = engine.Request("POST", "/x", "{}", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "abcde");
}

TEST(BeastEngineTest, GetsReuseOneKeptConnection) {
  ShortTempDir dir;
  CannedHttpServer server(dir.File("d.sock"), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK",
                          CannedHttpServer::Mode::kKeepAlive);
  BeastDockerEngine engine(dir.File("d.sock"));
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/_ping", "", {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->body, "OK");
  }
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(engine.idle_connections(), 1u);
  for (const std::string& head : server.requests()) {
    EXPECT_EQ(head.find("Connection: close"), std::string::npos) << head;
  }
}

// A daemon that keeps connections open, and an engine primed with one kept connection.
class KeptConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(engine_.Request("GET", "/_ping", "", {}).ok());
    ASSERT_EQ(engine_.idle_connections(), 1u);
  }
  ShortTempDir dir_;
  CannedHttpServer server_{dir_.File("d.sock"), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK",
                           CannedHttpServer::Mode::kKeepAlive};
  BeastDockerEngine engine_{dir_.File("d.sock")};
};

TEST_F(KeptConnectionTest, MutationsNeverUseAKeptConnection) {
  absl::StatusOr<docker::HttpResponse> r = engine_.Request("POST", "/containers/x/start", "", {});
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<docker::HttpResponse> d = engine_.Request("DELETE", "/containers/x", "", {});
  ASSERT_TRUE(d.ok()) << d.status();
  // Each mutation had a connection of its own, asked to close, and none was kept.
  EXPECT_EQ(server_.connections(), 3);
  EXPECT_EQ(engine_.idle_connections(), 1u);
  std::vector<std::string> heads = server_.requests();
  ASSERT_EQ(heads.size(), 3u);
  EXPECT_NE(heads[1].find("Connection: close"), std::string::npos) << heads[1];
  EXPECT_NE(heads[2].find("Connection: close"), std::string::npos) << heads[2];
}

// The daemon closes every connection after its answer although the client asked to keep it:
// whether the engine notices before reusing it or only when the reuse fails, every GET is
// answered, each on a new connection, and nothing is sent twice on one connection.
TEST(BeastEngineTest, AKeptConnectionTheDaemonClosedIsReplacedForGets) {
  ShortTempDir dir;
  CannedHttpServer server(dir.File("d.sock"), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK");
  BeastDockerEngine engine(dir.File("d.sock"));
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<docker::HttpResponse> r = engine.Request("GET", "/_ping", "", {});
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
    EXPECT_EQ(r->body, "OK");
  }
  EXPECT_EQ(server.connections(), 3);
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST_F(KeptConnectionTest, ConnectionsAreCloseOnExec) {
  // The kept connection is the only descriptor connected to d.sock: find it in /proc/self/fd.
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = std::stoi(e.path().filename().string());
    sockaddr_un peer{};
    socklen_t len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    if (peer.sun_family != AF_UNIX || dir_.File("d.sock") != peer.sun_path) continue;
    EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC) << "fd " << fd;
    ++checked;
  }
  EXPECT_EQ(checked, 1);
}

// A socket file with mode 000, connected to by an unprivileged uid: EACCES at connect().
TEST(BeastEngineTest, Mode000SocketAsNonRootIsDaemonPermissionDenied) {
  SN_REQUIRE_ROOT();
  ShortTempDir dir;
  std::string path = dir.File("d.sock");
  {
    CannedHttpServer server(path, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK");
    ASSERT_EQ(chmod(path.c_str(), 0), 0);
    // The child is forked while the canned server's thread runs; glibc's fork() keeps malloc
    // usable in the child, and the child touches nothing else the thread owns.
    int code = sn::testing::RunAsUser(65534, 65534, [&path]() -> int {
      BeastDockerEngine engine(path);
      ProbeResult p = ProbeDocker(engine, absl::Seconds(2));
      if (p.ready) return 10;
      return 20 + static_cast<int>(p.diagnostic.value_or(Diagnostic::kProviderUnavailable));
    });
    ASSERT_NE(code, 250) << "setuid(65534) failed in the child";
    EXPECT_EQ(code, 20 + static_cast<int>(Diagnostic::kDaemonPermissionDenied));
    EXPECT_EQ(server.connections(), 0);
  }
}

}  // namespace
}  // namespace sn::privhelper

// privhelper's server: socket ownership and mode, SO_PEERCRED admission at accept, the per-RPC
// re-check, the bound on open agent connections, and the Probe RPC end to end over the unix
// socket.
#include "privhelper/rpc/server.h"

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "gtest/gtest.h"
#include "privhelper/rpc/peer.h"
#include "proto/privhelper.grpc.pb.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;
using sn::testing::ShortTempDir;

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

class FakeProvider final : public Provider {
 public:
  explicit FakeProvider(ProbeResult r) : result_(std::move(r)) {}
  std::string_view name() const override { return "docker"; }
  ProbeResult Probe() override { return result_; }

 private:
  ProbeResult result_;
};

ProbeResult Ready() {
  ProbeResult r;
  r.ready = true;
  r.fingerprint = "docker/1.0 overlay2 systemd";
  return r;
}

std::unique_ptr<PrivHelperServer> StartServer(const std::string& path, uid_t agent_uid,
                                              ProbeResult r = Ready()) {
  ServerOptions o;
  o.socket_path = path;
  o.agent_uid = agent_uid;
  absl::StatusOr<std::unique_ptr<PrivHelperServer>> s =
      PrivHelperServer::Start(o, std::make_unique<FakeProvider>(std::move(r)));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// Connects and speaks the HTTP/2 client preface. Async-signal-safe (usable after fork).
// Returns 0 when the server answered with bytes (admitted; the connection is left open in
// `*kept`), 1 when it closed the connection (refused), 2 when connect() failed, 3 on a 10 s
// safety bound.
int SpeakHttp2Keep(const char* path, int* kept) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return 2;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return 2;
  }
  static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
  if (send(fd, kPreface, sizeof kPreface - 1, MSG_NOSIGNAL) < 0) {  // EPIPE: closed
    close(fd);
    return 1;
  }
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1) {
    close(fd);
    return 3;
  }
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n > 0) {
    *kept = fd;
    return 0;
  }
  close(fd);
  return 1;
}

int SpeakHttp2(const char* path) {
  int fd = -1;
  int r = SpeakHttp2Keep(path, &fd);
  if (fd >= 0) close(fd);
  return r;
}

absl::StatusOr<pb::ProbeResponse> CallProbe(const std::string& path, int64_t generation) {
  auto channel = grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials());
  auto stub = pb::PrivHelper::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::ProbeRequest req;
  req.set_generation(generation);
  pb::ProbeResponse resp;
  grpc::Status s = stub->Probe(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  return resp;
}

TEST(ServerTest, AgentProbeOverTheSocketAnswersReadyAndFingerprint) {
  ShortTempDir dir;
  auto server = StartServer(dir.File("ph.sock"), geteuid());
  ASSERT_NE(server, nullptr);
  absl::StatusOr<pb::ProbeResponse> r = CallProbe(dir.File("ph.sock"), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ready());
  EXPECT_EQ(r->diagnostic(), pb::DIAGNOSTIC_UNSPECIFIED);
  EXPECT_EQ(r->backend_fingerprint(), "docker/1.0 overlay2 systemd");
  EXPECT_EQ(r->provider(), "docker");
}

TEST(ServerTest, UnreadyProviderAnswersItsProtoDiagnostic) {
  ShortTempDir dir;
  ProbeResult unready;
  unready.diagnostic = Diagnostic::kDaemonPermissionDenied;
  auto server = StartServer(dir.File("ph.sock"), geteuid(), unready);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<pb::ProbeResponse> r = CallProbe(dir.File("ph.sock"), 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->ready());
  EXPECT_EQ(r->diagnostic(), pb::DAEMON_PERMISSION_DENIED);
  EXPECT_EQ(r->backend_fingerprint(), "");
}

TEST(ServerTest, ProbeOfNoGenerationIsServedAndANegativeOneIsInvalidArgument) {
  ShortTempDir dir;
  auto server = StartServer(dir.File("ph.sock"), geteuid());
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(CallProbe(dir.File("ph.sock"), 0).ok());
  EXPECT_EQ(CallProbe(dir.File("ph.sock"), -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ServerTest, ExistingNonSocketAtThePathIsKeptAndStartFails) {
  ShortTempDir dir;
  std::string path = dir.File("ph.sock");
  { std::ofstream(path) << "precious"; }
  ServerOptions o;
  o.socket_path = path;
  o.agent_uid = geteuid();
  auto s = PrivHelperServer::Start(o, std::make_unique<FakeProvider>(Ready()));
  EXPECT_FALSE(s.ok());
  std::ifstream in(path);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
}

TEST(ServerTest, StaleSocketIsReplaced) {
  ShortTempDir dir;
  std::string path = dir.File("ph.sock");
  { auto first = StartServer(path, geteuid()); }
  // The first server unlinked its socket; leave a stale one behind deliberately.
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  close(fd);
  auto server = StartServer(path, geteuid());
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(CallProbe(path, 1).ok());
}

TEST(ServerTest, SocketIsMode0660OwnedByRootAndTheAgentsGroup) {
  SN_REQUIRE_ROOT();
  ShortTempDir dir;
  auto server = StartServer(dir.File("ph.sock"), kNobody);
  ASSERT_NE(server, nullptr);
  struct stat st {};
  ASSERT_EQ(lstat(dir.File("ph.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, kNogroup);
}

TEST(ServerTest, RootPeerIsRefusedWhenServingAnotherUid) {
  SN_REQUIRE_ROOT();
  ShortTempDir dir;
  auto server = StartServer(dir.File("ph.sock"), kNobody);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(SpeakHttp2(dir.File("ph.sock").c_str()), 1);
  absl::StatusOr<pb::ProbeResponse> r = CallProbe(dir.File("ph.sock"), 1);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST(ServerTest, AgentUidPeerIsAdmitted) {
  SN_REQUIRE_ROOT();
  ShortTempDir dir;
  auto server = StartServer(dir.File("ph.sock"), kNobody);
  ASSERT_NE(server, nullptr);
  std::string path = dir.File("ph.sock");
  int code = sn::testing::RunAsUser(kNobody, kNogroup, [&path] { return SpeakHttp2(path.c_str()); });
  ASSERT_NE(code, 250) << "setuid failed in the child";
  EXPECT_EQ(code, 0);
}

// A uid in the agent's group reaches the socket through its 0660 mode but is not the agent.
TEST(ServerTest, OtherUidInTheAgentsGroupIsRefusedByPeerCredentials) {
  SN_REQUIRE_ROOT();
  ShortTempDir dir;
  auto server = StartServer(dir.File("ph.sock"), kNobody);
  ASSERT_NE(server, nullptr);
  std::string path = dir.File("ph.sock");
  int code = sn::testing::RunAsUser(12345, kNogroup, [&path] { return SpeakHttp2(path.c_str()); });
  ASSERT_NE(code, 250) << "setuid failed in the child";
  EXPECT_EQ(code, 1);
}

TEST(ServerTest, UidOutsideTheAgentsGroupCannotReachTheSocket) {
  SN_REQUIRE_ROOT();
  ShortTempDir dir;
  auto server = StartServer(dir.File("ph.sock"), kNobody);
  ASSERT_NE(server, nullptr);
  std::string path = dir.File("ph.sock");
  int code = sn::testing::RunAsUser(12345, 12345, [&path] { return SpeakHttp2(path.c_str()); });
  ASSERT_NE(code, 250) << "setuid failed in the child";
  EXPECT_EQ(code, 2);
}

// Finding 4 (connection bound), as the agent's uid: kMaxAdmittedConnections connections are
// served, the next is closed at once, and closing one lets a new one in. Runs in a forked
// child (async-signal-safe calls only); exit codes say which step failed.
TEST(ServerTest, AgentBeyondTheConnectionBoundIsRefusedAndClosingOneFreesASlot) {
  SN_REQUIRE_ROOT();
  ShortTempDir dir;
  auto server = StartServer(dir.File("ph.sock"), kNobody);
  ASSERT_NE(server, nullptr);
  std::string path = dir.File("ph.sock");
  int code = sn::testing::RunAsUser(kNobody, kNogroup, [&path] {
    int held[kMaxAdmittedConnections];
    for (size_t i = 0; i < kMaxAdmittedConnections; ++i) {
      if (SpeakHttp2Keep(path.c_str(), &held[i]) != 0) return 10 + static_cast<int>(i);
    }
    int extra = -1;
    if (SpeakHttp2Keep(path.c_str(), &extra) != 1) return 40;  // one more: refused
    close(held[0]);
    // gRPC notices the close and closes its descriptor; bounded wait for the freed slot.
    for (int attempt = 0; attempt < 500; ++attempt) {
      int r = SpeakHttp2Keep(path.c_str(), &extra);
      if (r == 0) return 0;
      if (r != 1) return 41;
      timespec ts{0, 20 * 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
    return 42;
  });
  ASSERT_NE(code, 250) << "setuid failed in the child";
  EXPECT_EQ(code, 0) << "10+i: connection i within the bound was not served; 40: the one "
                        "beyond the bound was not refused; 41/42: no slot after closing one";
}

TEST(AdmittedPeersTest, AdmitRefusesBeyondTheBoundUntilAnAdmittedSocketIsClosed) {
  AdmittedPeers peers(geteuid(), 3);
  int sv[4][2];
  for (auto& p : sv) ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(peers.Admit(sv[i][0]).ok());
  EXPECT_EQ(peers.Admit(sv[3][0]).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(peers.OpenCount(), 3u);
  // gRPC closes an admitted fd without telling the registry: the purge notices.
  close(sv[1][0]);
  EXPECT_EQ(peers.OpenCount(), 2u);
  EXPECT_TRUE(peers.Admit(sv[3][0]).ok());
  EXPECT_TRUE(peers.Verify("fd:" + std::to_string(sv[3][0])).ok());
  for (int i : {0, 2, 3}) close(sv[i][0]);
  for (auto& p : sv) close(p[1]);
}

TEST(AdmittedPeersTest, DisconnectedConnectionNoLongerCountsOrVerifies) {
  AdmittedPeers peers(geteuid(), 1);
  int a[2], b[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
  ASSERT_TRUE(peers.Admit(a[0]).ok());
  EXPECT_TRUE(peers.Disconnect("fd:" + std::to_string(a[0])));
  EXPECT_EQ(peers.Verify("fd:" + std::to_string(a[0])).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(peers.Admit(b[0]).ok());
  for (int fd : {a[0], a[1], b[0], b[1]}) close(fd);
}

// The per-RPC re-check (AdmittedPeers::Verify), on socketpairs.
TEST(AdmittedPeersTest, AdmittedSocketOfTheAgentVerifies) {
  AdmittedPeers peers(geteuid());
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(peers.Admit(sv[0]).ok());
  EXPECT_TRUE(peers.Verify("fd:" + std::to_string(sv[0])).ok());
  close(sv[0]);
  close(sv[1]);
}

TEST(AdmittedPeersTest, UnknownFdOrForeignPeerStringIsDenied) {
  AdmittedPeers peers(geteuid());
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  EXPECT_EQ(peers.Verify("fd:" + std::to_string(sv[0])).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(peers.Verify("ipv4:127.0.0.1:5").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(peers.Verify("fd:").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(peers.Verify("fd:3x").code(), absl::StatusCode::kPermissionDenied);
  close(sv[0]);
  close(sv[1]);
}

TEST(AdmittedPeersTest, FdNumberReusedByAnotherSocketIsDenied) {
  AdmittedPeers peers(geteuid());
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(peers.Admit(sv[0]).ok());
  int fd = sv[0];
  close(sv[0]);
  close(sv[1]);
  int again[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, again), 0);
  ASSERT_EQ(again[0], fd);  // the lowest free number is reused
  EXPECT_EQ(peers.Verify("fd:" + std::to_string(fd)).code(), absl::StatusCode::kPermissionDenied);
  close(again[0]);
  close(again[1]);
}

TEST(AdmittedPeersTest, AdmittedPeerOfAnotherUidIsDenied) {
  AdmittedPeers peers(geteuid() + 1);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(peers.Admit(sv[0]).ok());
  EXPECT_EQ(peers.Verify("fd:" + std::to_string(sv[0])).code(), absl::StatusCode::kPermissionDenied);
  close(sv[0]);
  close(sv[1]);
}

TEST(PeerTest, RootIsNotAllowedUnlessItIsTheAgent) {
  EXPECT_FALSE(PeerAllowed(PeerCred{1, 0, 0}, 1000));
  EXPECT_TRUE(PeerAllowed(PeerCred{1, 1000, 1000}, 1000));
  EXPECT_TRUE(PeerAllowed(PeerCred{1, 0, 0}, 0));
}

}  // namespace
}  // namespace sn::privhelper

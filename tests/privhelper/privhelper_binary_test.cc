// The privhelper executable: configuration errors at start-up, then Probe and Execute over its
// socket (with a missing Docker socket, so no dockerd is needed), and a clean SIGTERM exit;
// start-up refusals of an untrusted config file or socket directory; and its behaviour when
// it runs out of file descriptors while a client floods it with connections (finding 5).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/config.h"
#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "privhelper/rpc/admission.h"
#include "proto/privhelper.grpc.pb.h"
#include "tests/privhelper/test_util.h"

extern char** environ;

#ifdef ABSL_HAVE_ADDRESS_SANITIZER  // gcc and clang alike
#define SN_SANITIZED 1
#else
#define SN_SANITIZED 0
#endif

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;

std::string Runfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  return (srcdir && ws) ? std::string(srcdir) + "/" + ws + "/" + rel : rel;
}

// Starts privhelper with `config` (from a copy beside which the native helper lies, as
// installed); its stderr goes to `err_path`.
pid_t Start(const std::string& config, const std::string& err_path) {
  const std::string dir = config.substr(0, config.rfind('/'));
  for (const char* rel : {"privhelper/privhelper", "privhelper/native/native_helper"}) {
    const std::string name = std::string(rel).substr(std::string(rel).rfind('/') + 1);
    std::filesystem::copy_file(Runfile(rel), dir + "/" + name,
                               std::filesystem::copy_options::overwrite_existing);
  }
  std::string bin = dir + "/privhelper";
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

pb::ExecuteRequest Inspect(const std::string& installation) {
  pb::ExecuteRequest req;
  req.set_request_id("0000cccc-0000-4000-8000-000000000001");
  req.set_generation(1);
  req.set_budget_ms(10000);
  req.set_installation_id(installation);
  req.mutable_inspect()->set_sandbox_id("0000dddd-0000-4000-8000-000000000001");
  return req;
}

// One Execute stream carrying one request (no payload).
grpc::Status CallExecute(pb::PrivHelper::Stub* stub, const pb::ExecuteRequest& req,
                         pb::ExecuteResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  pb::ExecuteMessage m;
  *m.mutable_request() = req;
  std::unique_ptr<grpc::ClientWriter<pb::ExecuteMessage>> w = stub->Execute(&ctx, resp);
  w->WriteLast(m, grpc::WriteOptions());
  return w->Finish();
}

std::string Specification() {
  wire::SpecificationDocument d;
  d.generation = 1;
  d.provider = "docker";
  d.runtime_source = "bin-1";
  d.artifacts.push_back({"busybox.tar", "image", std::string(64, '1'), 0});
  d.images.push_back({"busybox", "busybox.tar", {"sha256:" + std::string(64, 'a')}});
  return wire::EncodeSpecificationDocument(d);
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

// A valid config for `dir`: socket dir/ph.sock, the caller's uid as the agent, no dockerd.
std::string WriteConfig(const sn::testing::ShortTempDir& dir, const std::string& name,
                        const std::string& socket) {
  std::ofstream(dir.File(name))
      << R"({"socket":")" << socket << R"(","agent_uid":)" << geteuid() << R"(,"state_dir":")"
      << dir.File("state") << R"(","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","docker_socket":")"
      << dir.File("no-docker.sock") << R"("})";
  return dir.File(name);
}

TEST(PrivhelperBinaryTest, UnknownConfigMemberStopsStartupNamingIt) {
  sn::testing::ShortTempDir dir;
  std::ofstream(dir.File("c.json"))
      << R"({"socket":")" << dir.File("ph.sock") << R"(","agent_uid":0,"state_dir":")"
      << dir.File("state") << R"(","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","sockets":1})";
  pid_t pid = Start(dir.File("c.json"), dir.File("err"));
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitExit(pid), 2);
  EXPECT_NE(Slurp(dir.File("err")).find("sockets"), std::string::npos) << Slurp(dir.File("err"));
}

TEST(PrivhelperBinaryTest, SymlinkedConfigFileStopsStartupNamingIt) {
  sn::testing::ShortTempDir dir;
  std::string real = WriteConfig(dir, "real.json", dir.File("ph.sock"));
  ASSERT_EQ(symlink(real.c_str(), dir.File("c.json").c_str()), 0);
  pid_t pid = Start(dir.File("c.json"), dir.File("err"));
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitExit(pid), 2);
  std::string err = Slurp(dir.File("err"));
  EXPECT_NE(err.find(dir.File("c.json") + ": is a symbolic link"), std::string::npos) << err;
  struct stat st {};
  EXPECT_NE(lstat(dir.File("ph.sock").c_str(), &st), 0);
}

TEST(PrivhelperBinaryTest, GroupWritableConfigFileStopsStartupNamingIt) {
  sn::testing::ShortTempDir dir;
  std::string config = WriteConfig(dir, "c.json", dir.File("ph.sock"));
  ASSERT_EQ(chmod(config.c_str(), 0664), 0);
  pid_t pid = Start(config, dir.File("err"));
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitExit(pid), 2);
  std::string err = Slurp(dir.File("err"));
  EXPECT_NE(err.find(config + ": is writable by group or others"), std::string::npos) << err;
}

// A socket directory anyone may write to: privhelper does not start, and what was planted at
// the socket path (a link to a root file) is left as it was.
TEST(PrivhelperBinaryTest, WorldWritableSocketDirectoryStopsStartupAndTouchesNothing) {
  sn::testing::ShortTempDir dir;
  ASSERT_EQ(mkdir(dir.File("run").c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.File("run").c_str(), 0777), 0);
  { std::ofstream(dir.File("victim")) << "secret"; }
  ASSERT_EQ(chmod(dir.File("victim").c_str(), 0600), 0);
  ASSERT_EQ(symlink(dir.File("victim").c_str(), dir.File("run/ph.sock").c_str()), 0);
  struct stat before {};
  ASSERT_EQ(stat(dir.File("victim").c_str(), &before), 0);

  pid_t pid = Start(WriteConfig(dir, "c.json", dir.File("run/ph.sock")), dir.File("err"));
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitExit(pid), 2);
  std::string err = Slurp(dir.File("err"));
  EXPECT_NE(err.find(dir.File("run") + ": is writable by group or others"), std::string::npos)
      << err;
  struct stat after {};
  ASSERT_EQ(stat(dir.File("victim").c_str(), &after), 0);
  EXPECT_EQ(after.st_uid, before.st_uid);
  EXPECT_EQ(after.st_gid, before.st_gid);
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(Slurp(dir.File("victim")), "secret");
}

TEST(PrivhelperBinaryTest, ServesProbeAndExecuteThenExitsCleanlyOnSigterm) {
  sn::testing::ShortTempDir dir;
  std::ofstream(dir.File("c.json"))
      << R"({"socket":")" << dir.File("ph.sock") << R"(","agent_uid":)" << geteuid()
      << R"(,"state_dir":")" << dir.File("state") << R"(","provider":"docker","release_public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","docker_socket":")"
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
    // Before a generation is registered, Execute is not in the permit table's phase: the
    // call is refused and the connection dropped.
    pb::ExecuteResponse resp;
    grpc::Status st = CallExecute(stub.get(), Inspect(installation), &resp);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(Slurp(dir.File("err")).find("permit-table violation"), std::string::npos)
        << st.error_code() << " " << st.error_message() << "\n" << Slurp(dir.File("err"));
  }
  channel = grpc::CreateChannel("unix:" + dir.File("ph.sock"), grpc::InsecureChannelCredentials());
  stub = pb::PrivHelper::NewStub(channel);
  {
    // Preparation is served before any generation is ready, and answers typed: a
    // specification whose release was never adopted is configuration_invalid.
    const std::string spec = Specification();
    grpc::ClientContext ctx;
    pb::BeginPreparationRequest req;
    req.set_generation(1);
    req.set_specification(spec);
    req.set_specification_digest(Sha256Hex(spec));
    pb::PreparationResult resp;
    grpc::Status s = stub->BeginPreparation(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message() << Slurp(dir.File("err"));
    EXPECT_EQ(resp.diagnostic(), pb::CONFIGURATION_INVALID);
  }
  {
    // A release signed by another key than privhelper's configured one: provenance.
    grpc::ClientContext ctx;
    pb::ReleaseMetadata req;
    req.set_source("bin-1");
    req.set_manifest("{}");
    req.set_signature(std::string(88, 'A') + "\n");
    req.set_sha256sums("");
    pb::PreparationResult resp;
    ASSERT_TRUE(stub->AdoptRelease(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.diagnostic(), pb::RUNTIME_DOWNLOAD_FAILED);
  }
  struct stat st {};
  ASSERT_EQ(stat(dir.File("state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid), 0) << Slurp(dir.File("err"));
  EXPECT_NE(stat(dir.File("ph.sock").c_str(), &st), 0);  // the socket is removed
}


// A /proc file read with read(2): "" when it is gone (a descriptor closed meanwhile).
std::string ReadProcFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

// What each of the process's descriptors is (its /proc link target), by number.
std::map<int, std::string> FdTable(pid_t pid) {
  std::map<int, std::string> table;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code link_ec;
    std::filesystem::path target = std::filesystem::read_symlink(it->path(), link_ec);
    table[std::stoi(it->path().filename().string())] = link_ec ? "?" : target.string();
  }
  return table;
}

// The descriptors of `now` that `before` did not have (or had as another file), with their
// fdinfo: what a failed descriptor count says about the leftover.
std::string NewFds(pid_t pid, const std::map<int, std::string>& before,
                   const std::map<int, std::string>& now) {
  std::string out;
  for (const auto& [fd, target] : now) {
    auto it = before.find(fd);
    if (it != before.end() && it->second == target) continue;
    out += "fd " + std::to_string(fd) + " -> " + target + "\n" +
           ReadProcFile("/proc/" + std::to_string(pid) + "/fdinfo/" + std::to_string(fd));
  }
  return out;
}

// User plus system CPU time the process has used, in seconds (/proc/<pid>/stat).
double CpuSeconds(pid_t pid) {
  std::string stat = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
  if (f.size() < 13) return -1;
  // After "pid (comm) ": state is field 3, utime 14, stime 15.
  return static_cast<double>(std::stoll(f[11]) + std::stoll(f[12])) / sysconf(_SC_CLK_TCK);
}

int ConnectUnix(const std::string& path, bool nonblock) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && !nonblock) {
    close(fd);
    return -1;
  }
  return fd;
}

size_t CountOccurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// A Probe that waits (bounded) until a connection is served: a connection privhelper closes
// while still short of descriptors is retried, as the agent's channels do.
bool ProbeOk(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  pb::ProbeRequest req;
  req.set_generation(1);
  pb::ProbeResponse resp;
  grpc::Status st = pb::PrivHelper::NewStub(channel)->Probe(&ctx, req, &resp);
  if (!st.ok()) ADD_FAILURE() << "Probe: " << st.error_code() << " " << st.error_message();
  return st.ok();
}

// The capability sets of every thread of `pid` ("CapPrm" -> its hex), "" for one not found.
std::vector<std::map<std::string, std::string>> ThreadCapabilities(pid_t pid) {
  std::vector<std::map<std::string, std::string>> out;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(
           "/proc/" + std::to_string(pid) + "/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::map<std::string, std::string> sets;
    std::istringstream status(ReadProcFile(it->path().string() + "/status"));
    std::string line;
    while (std::getline(status, line)) {
      for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
        if (line.rfind(std::string(set) + ":", 0) == 0) {
          sets[set] = line.substr(line.find_first_not_of(" \t", strlen(set) + 1));
        }
      }
    }
    // gRPC's thread manager starts and ends serving threads as calls come and go: a thread
    // listed above may have exited before its status was read (open or read fails, ESRCH).
    // An exited thread holds nothing; one still there with a set missing is reported as is.
    if (sets.size() < 5 && !std::filesystem::exists(it->path())) continue;
    out.push_back(sets);
  }
  return out;
}

// One capability set of a thread as /proc shows it, or a note that it was missing.
std::string CapabilitySet(const std::map<std::string, std::string>& sets, const char* name) {
  auto it = sets.find(name);
  return it == sets.end() ? std::string("(missing ") + name + ")" : it->second;
}

// Started as root with every capability, privhelper keeps only CAP_SETPCAP (bit 8, for the
// helpers' spawn) once its socket is bound: in every thread, and in the bounding set too, so
// nothing can take CAP_SETGID or another capability back.
TEST(PrivhelperBinaryTest, AfterStartEveryThreadHoldsOnlyCapSetpcap) {
  SN_REQUIRE_ROOT();
  sn::testing::ShortTempDir dir;
  pid_t pid = Start(WriteConfig(dir, "c.json", dir.File("ph.sock")), dir.File("err"));
  ASSERT_GT(pid, 0);
  auto channel = grpc::CreateChannel("unix:" + dir.File("ph.sock"),
                                     grpc::InsecureChannelCredentials());
  ASSERT_TRUE(ProbeOk(channel)) << Slurp(dir.File("err"));  // every serving thread started
  std::vector<std::map<std::string, std::string>> threads = ThreadCapabilities(pid);
  ASSERT_GT(threads.size(), 1u);
  for (const auto& sets : threads) {
    EXPECT_EQ(CapabilitySet(sets, "CapPrm"), "0000000000000100");
    EXPECT_EQ(CapabilitySet(sets, "CapEff"), "0000000000000100");
    EXPECT_EQ(CapabilitySet(sets, "CapBnd"), "0000000000000100");
    EXPECT_EQ(CapabilitySet(sets, "CapInh"), "0000000000000000");
    EXPECT_EQ(CapabilitySet(sets, "CapAmb"), "0000000000000000");
  }
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid), 0) << Slurp(dir.File("err"));
}

// What a descriptor is beyond `before`: nothing ("" when it is the same file), or its target
// and its fdinfo flags in octal.
struct FdDescription {
  std::string target;
  unsigned flags = 0;
};
std::map<int, FdDescription> ExtraFds(pid_t pid, const std::map<int, std::string>& before) {
  std::map<int, FdDescription> extra;
  for (const auto& [fd, target] : FdTable(pid)) {
    auto it = before.find(fd);
    if (it != before.end() && it->second == target) continue;
    FdDescription d{target, 0};
    std::istringstream info(
        ReadProcFile("/proc/" + std::to_string(pid) + "/fdinfo/" + std::to_string(fd)));
    std::string line;
    while (std::getline(info, line)) {
      if (line.rfind("flags:", 0) == 0) d.flags = std::stoul(line.substr(6), nullptr, 8);
    }
    extra[fd] = d;
  }
  return extra;
}

// What an episode of running out of descriptors left behind: "" when privhelper's descriptor
// table is the baseline's again — no connection, no second reserve (a blocking eventfd), no
// wakeup eventfd of a gRPC poller (non-blocking; privhelper's one poller made its own before the
// baseline was taken, kMaxServerPollers). Waits (bounded) for privhelper to close the
// connections the episode's clients closed: nothing signals that to a client.
std::string EpisodeLeftovers(pid_t pid, const std::map<int, std::string>& baseline) {
  std::string why;
  for (int i = 0; i < 400; ++i) {
    std::map<int, FdDescription> extra = ExtraFds(pid, baseline);
    int pollers = 0;
    why.clear();
    for (const auto& [fd, d] : extra) {
      if (d.target == "anon_inode:[eventfd]" && (d.flags & O_NONBLOCK) != 0) {
        ++pollers;
        continue;
      }
      why += "fd " + std::to_string(fd) + " -> " + d.target + "\n";
    }
    if (pollers > kMaxServerPollers - 1) {
      why += std::to_string(pollers) + " new poller eventfds, more than gRPC's " +
             std::to_string(kMaxServerPollers) + " pollers can hold\n";
    }
    if (why.empty()) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return why + NewFds(pid, baseline, FdTable(pid));
}
static_assert(kMaxServerPollers == 1, "EpisodeLeftovers allows kMaxServerPollers - 1 eventfds");

// Connects `n` clients, each sending gRPC's preface: the ones privhelper serves (it answers)
// are returned open; the ones it closes at once are closed and counted in `closed`.
std::vector<int> FillDescriptors(const std::string& sock, int n, int* closed) {
  static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
  std::vector<int> served;
  for (int i = 0; i < n; ++i) {
    int fd = ConnectUnix(sock, /*nonblock=*/false);
    if (fd < 0) {
      ADD_FAILURE() << "connect: " << strerror(errno);
      continue;
    }
    send(fd, kPreface, sizeof kPreface - 1, MSG_NOSIGNAL);
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) {
      ADD_FAILURE() << "connection " << i << " neither served nor closed";
      close(fd);
      continue;
    }
    char buf[64];
    if (read(fd, buf, sizeof buf) > 0) {
      served.push_back(fd);
    } else {
      ++*closed;
      close(fd);
    }
  }
  return served;
}

// Finding 5: with its descriptor limit reached and a client flooding it with connections,
// privhelper closes the connections it cannot take at once, logs a bounded number of lines,
// does not spin, and serves again once descriptors are free.
TEST(PrivhelperBinaryTest, OutOfDescriptorsItRefusesWithoutSpinningOrFloodingTheLogThenRecovers) {
#if SN_SANITIZED
  // The sanitizer runtimes need descriptors of their own: UBSan's vptr check probes memory
  // through a pipe() and reports a false "invalid vptr" when none is left (suppressions do not
  // help), and LeakSanitizer opens /proc at exit. A privhelper built with them cannot be
  // starved of descriptors meaningfully; the plain build runs this test.
  GTEST_SKIP() << "SKIPPED: descriptor starvation cannot run under the sanitizer runtimes";
#endif
  sn::testing::ShortTempDir dir;
  const std::string sock = dir.File("ph.sock");
  pid_t pid = Start(WriteConfig(dir, "c.json", sock), dir.File("err"));
  ASSERT_GT(pid, 0);
  auto first = grpc::CreateChannel("unix:" + sock, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(ProbeOk(first)) << Slurp(dir.File("err"));  // kept open: counted below

  // Room for exactly kRoom more descriptors: enough for a Probe once they are free again (it
  // opens a Docker connection and an event loop), all taken by the connections below.
  constexpr int kRoom = 8;
  rlimit old_limit{};
  ASSERT_EQ(prlimit(pid, RLIMIT_NOFILE, nullptr, &old_limit), 0);
  const std::map<int, std::string> baseline = FdTable(pid);
  const int open_fds = static_cast<int>(baseline.size());
  ASSERT_GT(open_fds, 0);
  rlimit low{static_cast<rlim_t>(open_fds + kRoom), old_limit.rlim_max};
  ASSERT_EQ(prlimit(pid, RLIMIT_NOFILE, &low, nullptr), 0);

  // More connections than that: what fits is served, the rest is closed at once, not left
  // waiting in the backlog.
  int closed = 0;
  std::vector<int> served = FillDescriptors(sock, kRoom + 4, &closed);
  EXPECT_GE(served.size(), 1u);
  EXPECT_GE(closed, 1) << "the descriptor limit was never reached";

  // A flood of connections for a measured window.
  const double cpu_before = CpuSeconds(pid);
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<bool> stop{false};
  std::atomic<int> attempts{0};
  std::thread flood([&] {
    while (!stop.load()) {
      int fd = ConnectUnix(sock, /*nonblock=*/true);
      if (fd >= 0) close(fd);
      attempts.fetch_add(1);
      timespec ts{0, 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the window measured, not an event
  stop.store(true);
  flood.join();
  const double window =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = CpuSeconds(pid) - cpu_before;
  EXPECT_GT(attempts.load(), 100);
  // The old loop used 100 % of a core here; pausing, privhelper uses almost nothing.
  EXPECT_LT(cpu, 0.2 * window) << "privhelper used " << cpu << " s of CPU in " << window << " s";
  std::string err = Slurp(dir.File("err"));
  // At most one line per 10 s (the old loop wrote ~180,000 lines per second).
  const size_t refusal_lines = CountOccurrences(err, "out of file descriptors");
  EXPECT_GE(refusal_lines, 1u) << err;
  EXPECT_LE(refusal_lines, 2u) << err;
  EXPECT_LT(CountOccurrences(err, "\n"), 40u) << err;

  // Descriptors freed: the served connections closed and what the flood left in the backlog
  // accepted and closed; nothing is left but what gRPC keeps by design (EpisodeLeftovers).
  for (int fd : served) close(fd);
  EXPECT_EQ(EpisodeLeftovers(pid, baseline), "") << "descriptors never freed";
  // Episodes in a row leave nothing behind either: a descriptor kept per episode would show
  // within two of them.
  for (int episode = 2; episode <= 6; ++episode) {
    int refused = 0;
    std::vector<int> fds = FillDescriptors(sock, kRoom + 4, &refused);
    EXPECT_GE(refused, 1) << "episode " << episode << " never ran out";
    for (int fd : fds) close(fd);
    EXPECT_EQ(EpisodeLeftovers(pid, baseline), "") << "after episode " << episode;
  }
  auto again = grpc::CreateChannel("unix:" + sock, grpc::InsecureChannelCredentials());
  EXPECT_TRUE(ProbeOk(again)) << Slurp(dir.File("err"));

  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid), 0) << Slurp(dir.File("err"));
}

}  // namespace
}  // namespace sn::privhelper

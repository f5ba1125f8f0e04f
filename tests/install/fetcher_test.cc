// The installer's network child (tools/install/fetcher.h; docs/security.md, "The installer"):
// security audit finding 6. A hostile Core (hostile_core.h, a process on port 0) and a lying
// child (a test hook run inside the confined child) attack the installer; every attack is
// refused with a specific error, the parsing of Core's answers happens in the child (its
// crash kills only the child), and root believes only what it re-verifies.
//
// Needs root (the child changes uid); "local" in BUILD for the same reason. Outside CI a
// non-root run skips loudly; with CI=true it fails.
#include "tools/install/fetcher.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/release/failure.h"
#include "common/release/signing.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/install/hostile_core.h"
#include "tests/release/fixture.h"
#include "tools/install/fetch_protocol.h"

namespace sn::install {
namespace {

using fetchwire::Kind;
using testing::Canned;
using testing::HostileCore;

constexpr char kEnrollPath[] = "/api/v1/sandbox-node/enroll";
constexpr char kToken[] = "enrollment-token-that-must-stay-secret";

std::string Text(const absl::Status& s) { return std::string(s.message()); }

class FetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      const char* ci = std::getenv("CI");
      if (ci != nullptr && std::string(ci) == "true") FAIL() << "needs root (CI=true)";
      GTEST_SKIP() << "SKIPPED LOUDLY: the network child's tests need root";
    }
    const passwd* pw = getpwnam("nobody");
    ASSERT_NE(pw, nullptr) << "the tests run the child as user nobody";
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    ASSERT_NE(uid_, 0u);
  }

  FetcherOptions Options(const HostileCore& core) {
    FetcherOptions o;
    absl::StatusOr<agent::Origin> origin = agent::ParseOrigin(core.origin(), true);
    EXPECT_TRUE(origin.ok()) << origin.status();
    o.origin = *origin;
    o.key = key_.public_key();
    o.uid = uid_;
    o.gid = gid_;
    return o;
  }

  std::unique_ptr<Fetcher> Start(FetcherOptions o) {
    absl::StatusOr<std::unique_ptr<Fetcher>> f = Fetcher::Start(std::move(o));
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? *std::move(f) : nullptr;
  }

  release::PrivateKey key_ = release::testing::NewKey();
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

std::string ProcFile(pid_t pid, const char* name) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/", name), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// ---- the child's confinement --------------------------------------------------------------

TEST_F(FetcherTest, TheChildRunsAsTheAgentUserWithoutCapabilitiesWithNoNewPrivsAndSeccomp) {
  HostileCore core({{kEnrollPath, 201,
                     R"({"node_id":"0b7f4d3e-58c4-4a8c-9d2e-1f0a2b3c4d5e","credential":"cred",)"
                     R"("deployment_generation":3,"specification_digest":")" +
                         std::string(64, 'a') + R"(","runtime_source":"e2e-1"})"}});
  ASSERT_TRUE(core.ok());
  std::unique_ptr<Fetcher> f = Start(Options(core));
  ASSERT_NE(f, nullptr);
  // What the kernel says of the child (root checked the same before Start returned).
  EXPECT_TRUE(CheckChildConfined(f->pid(), uid_, gid_).ok());
  const std::string status = ProcFile(f->pid(), "status");
  for (const char* want :
       {"\nCapInh:\t0000000000000000\n", "\nCapPrm:\t0000000000000000\n",
        "\nCapEff:\t0000000000000000\n", "\nCapBnd:\t0000000000000000\n",
        "\nCapAmb:\t0000000000000000\n", "\nNoNewPrivs:\t1\n", "\nSeccomp:\t2\n"}) {
    EXPECT_TRUE(absl::StrContains(status, want)) << want << " not in\n" << status;
  }
  const std::string ids = absl::StrCat(uid_, "\t", uid_, "\t", uid_, "\t", uid_);
  EXPECT_TRUE(absl::StrContains(status, "\nUid:\t" + ids + "\n")) << status;

  // The token crosses the socketpair only: never the child's command line or environment.
  wire::EnrollRequest req;
  req.enrollment_token = kToken;
  req.installation_id = "1b7f4d3e-58c4-4a8c-9d2e-1f0a2b3c4d5e";
  req.provider = "docker";
  absl::StatusOr<wire::EnrollResponse> resp = f->Enroll(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->credential, "cred");
  EXPECT_EQ(resp->deployment_generation, 3);
  EXPECT_FALSE(absl::StrContains(ProcFile(f->pid(), "cmdline"), kToken));
  EXPECT_FALSE(absl::StrContains(ProcFile(f->pid(), "environ"), kToken));
}

TEST_F(FetcherTest, TheFilterKillsTheChildOnExecve) {
  HostileCore core({});
  FetcherOptions o = Options(core);
  o.child_test_hook = [](int, Kind k) {
    if (k != Kind::kReady) return false;
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    execve("/bin/true", argv, argv + 1);
    return false;
  };
  absl::StatusOr<std::unique_ptr<Fetcher>> f = Fetcher::Start(std::move(o));
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(absl::IsUnavailable(f.status())) << f.status();
  EXPECT_TRUE(absl::StrContains(Text(f.status()), "seccomp filter forbids")) << f.status();
}

TEST_F(FetcherTest, TheChildCanNeitherWriteFilesNorSignalRoot) {
  HostileCore core({});
  const std::string victim = absl::StrCat(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR")
                                                                     : "/tmp",
                                          "/written-by-the-child");
  FetcherOptions o = Options(core);
  o.child_test_hook = [&victim](int, Kind k) {
    if (k == Kind::kCurrent) {  // exit 1 (EPERM) when the open is refused
      int fd = open(victim.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      _exit(fd < 0 ? errno : 0);
    }
    if (k == Kind::kEnroll) {
      // Not even itself with signal 0 (which the permission bits would allow): kill(2) is
      // outside the filter, so root is out of reach whatever the uids.
      const bool root_refused = kill(getppid(), SIGTERM) != 0 && errno == EPERM;
      const bool self_refused = kill(getpid(), 0) != 0 && errno == EPERM;
      _exit(root_refused && self_refused ? 42 : 0);
    }
    return false;
  };
  std::unique_ptr<Fetcher> f = Start(o);
  ASSERT_NE(f, nullptr);
  absl::StatusOr<std::string> r = f->Current();
  EXPECT_TRUE(absl::StrContains(Text(r.status()), "exited with status 1 ")) << r.status();
  EXPECT_NE(access(victim.c_str(), F_OK), 0);
  std::unique_ptr<Fetcher> g = Start(o);
  ASSERT_NE(g, nullptr);
  absl::StatusOr<wire::EnrollResponse> e = g->Enroll(wire::EnrollRequest{});
  EXPECT_TRUE(absl::StrContains(Text(e.status()), "exited with status 42 ")) << e.status();
}

// ---- a hostile Core --------------------------------------------------------------------------

TEST_F(FetcherTest, AHostileCurrentReleaseIsRefusedByTheChildAndTheChildServesOn) {
  HostileCore core({{"/releases/current", 200, R"({"source":"../../etc/shadow"})"}});
  std::unique_ptr<Fetcher> f = Start(Options(core));
  ASSERT_NE(f, nullptr);
  for (int i = 0; i < 2; ++i) {  // a refusal is an answer: the same child answers again
    absl::StatusOr<std::string> r = f->Current();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(release::FailureClassOf(r.status()), release::FailureClass::kProvenance)
        << r.status();
    EXPECT_TRUE(absl::StrContains(Text(r.status()), "/releases/current")) << r.status();
  }
}

TEST_F(FetcherTest, AHugeAnswerIsRefusedByTheChildWithinItsBound) {
  HostileCore core({{"/releases/current", 200, std::string(3 << 20, '[')}});
  std::unique_ptr<Fetcher> f = Start(Options(core));
  ASSERT_NE(f, nullptr);
  absl::StatusOr<std::string> r = f->Current();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(release::FailureClassOf(r.status()), release::FailureClass::kTransfer) << r.status();
}

TEST_F(FetcherTest, AHostileEnrollmentAnswerIsRefusedByTheChild) {
  HostileCore core({{kEnrollPath, 201,
                     R"({"node_id":"not-a-uuid","credential":"\u0000\u001b[2J",)"
                     R"("deployment_generation":-1,"specification_digest":"x",)"
                     R"("runtime_source":"../x","extra":[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]})"}});
  std::unique_ptr<Fetcher> f = Start(Options(core));
  ASSERT_NE(f, nullptr);
  wire::EnrollRequest req;
  req.enrollment_token = kToken;
  absl::StatusOr<wire::EnrollResponse> r = f->Enroll(req);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();  // CallEnrollRoute's invalid 201
  EXPECT_FALSE(absl::StrContains(Text(r.status()), "out of protocol")) << r.status();
  for (char c : Text(r.status())) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << r.status();
}

TEST_F(FetcherTest, ACrashWhileParsingKillsOnlyTheChildAndRootSaysSo) {
  HostileCore core({{"/releases/current", 200, R"({"source":"host-1"})"}});
  FetcherOptions o = Options(core);
  o.child_test_hook = [](int, Kind k) {
    if (k == Kind::kCurrent) raise(SIGSEGV);  // stands for an exploited parser bug
    return false;
  };
  std::unique_ptr<Fetcher> f = Start(o);
  ASSERT_NE(f, nullptr);
  absl::StatusOr<std::string> r = f->Current();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(Text(r.status()), "was killed by signal 11")) << r.status();
  EXPECT_TRUE(absl::StrContains(Text(r.status()), "nothing it sent was used")) << r.status();
  EXPECT_TRUE(absl::IsFailedPrecondition(f->Current().status()));  // spent, said so
}

TEST_F(FetcherTest, AChildThatNeverAnswersIsKilledAtTheDeadline) {
  HostileCore core({});
  FetcherOptions o = Options(core);
  o.reply_deadline = absl::Milliseconds(200);
  o.child_test_hook = [](int, Kind k) {
    if (k == Kind::kCurrent) {
      for (;;) poll(nullptr, 0, -1);
    }
    return false;
  };
  std::unique_ptr<Fetcher> f = Start(o);
  ASSERT_NE(f, nullptr);
  const pid_t pid = f->pid();
  absl::StatusOr<std::string> r = f->Current();
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(Text(r.status()), "gave no answer in time")) << r.status();
  EXPECT_NE(kill(pid, 0), 0);  // killed and reaped
}

// ---- a lying child: root's strict decoding and its own verification ------------------------

TEST_F(FetcherTest, AnOversizedFrameFromTheChildIsRefusedBeforeItIsRead) {
  HostileCore core({});
  FetcherOptions o = Options(core);
  o.child_test_hook = [](int channel, Kind k) {
    if (k != Kind::kCurrent) return false;
    const char huge[] = {'\xff', '\xff', '\xff', '\xff', static_cast<char>(Kind::kResult)};
    ssize_t unused = write(channel, huge, sizeof huge);
    (void)unused;
    return true;
  };
  std::unique_ptr<Fetcher> f = Start(o);
  ASSERT_NE(f, nullptr);
  absl::StatusOr<std::string> r = f->Current();
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(Text(r.status()), "a frame of 4294967295 bytes")) << r.status();
}

TEST_F(FetcherTest, AValueBreakingItsRuleIsRefusedByRoot) {
  HostileCore core({});
  FetcherOptions o = Options(core);
  o.child_test_hook = [](int channel, Kind k) {
    if (k != Kind::kCurrent) return false;
    (void)fetchwire::WriteFrame(channel, Kind::kResult, fetchwire::EncodeCurrentResult("../x"));
    return true;
  };
  std::unique_ptr<Fetcher> f = Start(o);
  ASSERT_NE(f, nullptr);
  absl::StatusOr<std::string> r = f->Current();
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(Text(r.status()), "a release source breaks its rule"))
      << r.status();
}

TEST_F(FetcherTest, RootVerifiesTheMetadataAndTheBytesItself) {
  const release::testing::ArtifactBytes agent{"agent", "agent", "the agent's bytes"};
  release::testing::SignedRelease good = release::testing::MakeRelease(key_, "host-1", {agent});
  release::PrivateKey other = release::testing::NewKey();
  release::testing::SignedRelease forged = release::testing::MakeRelease(other, "host-1", {agent});
  HostileCore core({{"/releases/host-1/manifest.json.sig", 200, good.signature_file},
                    {"/releases/host-1/manifest.json", 200, good.manifest_bytes},
                    {"/releases/host-1/SHA256SUMS", 200, good.sums},
                    {"/releases/host-1/agent", 200, agent.bytes}});
  const std::string dir = release::testing::MakeTempDir();
  const wire::RuntimeArtifact a = release::testing::Describe(agent);

  // The honest child: verified metadata, a verified file of root's (0600).
  std::unique_ptr<Fetcher> f = Start(Options(core));
  ASSERT_NE(f, nullptr);
  absl::StatusOr<release::VerifiedRelease> v = f->Metadata("host-1");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->manifest_bytes(), good.manifest_bytes);
  ASSERT_TRUE(f->Artifact("host-1", a, dir + "/agent").ok());
  struct stat st;
  ASSERT_EQ(stat((dir + "/agent").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(*ReadSmallFile(dir + "/agent"), agent.bytes);

  // A lying child: metadata signed by another key, bytes that are not the artifact's.
  FetcherOptions o = Options(core);
  o.child_test_hook = [&forged](int channel, Kind k) {
    if (k == Kind::kMetadata) {
      (void)fetchwire::WriteFrame(channel, Kind::kResult,
                                  fetchwire::EncodeMetadataResult({forged.manifest_bytes,
                                                                   forged.signature_file,
                                                                   forged.sums}));
    } else if (k == Kind::kArtifact) {
      (void)fetchwire::WriteFrame(channel, Kind::kData, "the agent's BYTES");
      (void)fetchwire::WriteFrame(channel, Kind::kResult,
                                  fetchwire::EncodeStatusResult(absl::OkStatus()));
    } else {
      return false;
    }
    return true;
  };
  std::unique_ptr<Fetcher> liar = Start(o);
  ASSERT_NE(liar, nullptr);
  absl::StatusOr<release::VerifiedRelease> lie = liar->Metadata("host-1");
  ASSERT_FALSE(lie.ok());
  EXPECT_EQ(release::FailureClassOf(lie.status()), release::FailureClass::kProvenance)
      << lie.status();
  absl::Status bytes = liar->Artifact("host-1", a, dir + "/agent-2");
  EXPECT_EQ(release::FailureClassOf(bytes), release::FailureClass::kChecksum) << bytes;
  EXPECT_NE(access((dir + "/agent-2").c_str(), F_OK), 0);  // removed
}

TEST_F(FetcherTest, AnArtifactLongerThanDeclaredIsRefusedAndRemoved) {
  const release::testing::ArtifactBytes agent{"agent", "agent", "the agent's bytes"};
  HostileCore core({{"/releases/host-1/agent", 200, agent.bytes + std::string(1 << 20, 'x')}});
  const std::string dir = release::testing::MakeTempDir();
  FetcherOptions o = Options(core);
  std::vector<uint64_t> counted;
  o.on_artifact_bytes = [&counted](const wire::RuntimeArtifact&, uint64_t n) {
    counted.push_back(n);
  };
  std::unique_ptr<Fetcher> f = Start(std::move(o));
  ASSERT_NE(f, nullptr);
  absl::Status s = f->Artifact("host-1", release::testing::Describe(agent), dir + "/agent");
  EXPECT_EQ(release::FailureClassOf(s), release::FailureClass::kChecksum) << s;
  EXPECT_NE(access((dir + "/agent").c_str(), F_OK), 0);
  // The progress root reports is its own count of what it accepted: never past the size.
  for (uint64_t n : counted) EXPECT_LE(n, agent.bytes.size());
}

TEST_F(FetcherTest, RootCountsTheBytesItAcceptsPieceByPieceForTheProgressLines) {
  // Over 256 KiB: the child sends it in several data frames.
  const release::testing::ArtifactBytes agent{"agent", "agent", std::string(600 * 1024, 'a')};
  HostileCore core({{"/releases/host-1/agent", 200, agent.bytes}});
  const std::string dir = release::testing::MakeTempDir();
  const wire::RuntimeArtifact a = release::testing::Describe(agent);
  FetcherOptions o = Options(core);
  std::vector<uint64_t> counted;
  o.on_artifact_bytes = [&counted, &a](const wire::RuntimeArtifact& of, uint64_t n) {
    EXPECT_EQ(of, a);
    counted.push_back(n);
  };
  std::unique_ptr<Fetcher> f = Start(std::move(o));
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->Artifact("host-1", a, dir + "/agent").ok());
  ASSERT_GE(counted.size(), 3u);
  for (size_t i = 1; i < counted.size(); ++i) {
    EXPECT_GT(counted[i], counted[i - 1]);
    EXPECT_LE(counted[i] - counted[i - 1], fetchwire::kMaxDataPieceBytes);
  }
  EXPECT_EQ(counted.back(), agent.bytes.size());
}

}  // namespace
}  // namespace sn::install

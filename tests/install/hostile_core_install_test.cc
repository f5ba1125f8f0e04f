// Security audit finding 6 at the level of the whole installer (tools/install/installer.h):
// a hostile Core (hostile_core.h) answers the installer's first requests with hostile bodies;
// the run is refused with the child's diagnostic and nothing is installed or recorded. The
// child-level attacks (crash, lying child, confinement) are in fetcher_test.cc.
//
// Needs root (the installer runs as root and its child changes uid to `nobody`, the
// --agent-user here, which exists on every Debian host). Outside CI a non-root run skips
// loudly; with CI=true it fails.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/release/signing.h"
#include "gtest/gtest.h"
#include "tests/install/hostile_core.h"
#include "tests/release/fixture.h"
#include "tools/install/installer.h"

namespace sn::install {
namespace {

using testing::HostileCore;

constexpr char kEnrollPath[] = "/api/v1/sandbox-node/enroll";

class HostileCoreInstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      const char* ci = std::getenv("CI");
      if (ci != nullptr && std::string(ci) == "true") FAIL() << "needs root (CI=true)";
      GTEST_SKIP() << "SKIPPED LOUDLY: the installer's tests need root";
    }
    root_ = release::testing::MakeTempDir();
    chmod(root_.c_str(), 0755);
    out_ = std::tmpfile();
    ASSERT_NE(out_, nullptr);
  }
  void TearDown() override {
    if (out_ != nullptr) std::fclose(out_);
  }

  absl::Status Run(const HostileCore& core) {
    Options o;
    o.core_origin = core.origin();
    o.token = "a-token-the-hostile-core-must-not-spend";
    o.release_public_key = key_.public_key().Base64();
    o.insecure_allow_http = true;
    o.root = root_;
    o.agent_user = "nobody";
    o.docker_socket = root_ + "/no-docker.sock";
    return Install(o, out_);
  }

  bool Exists(const std::string& rel) const { return access((root_ + rel).c_str(), F_OK) == 0; }

  release::PrivateKey key_ = release::testing::NewKey();
  std::string root_;
  std::FILE* out_ = nullptr;
};

TEST_F(HostileCoreInstallTest, AHostileCurrentReleaseRefusesTheRunWithNothingWritten) {
  HostileCore core({{"/releases/current", 200, R"({"source":"../../../etc","x":)" +
                                                   std::string(100000, '[')}});
  ASSERT_TRUE(core.ok());
  absl::Status s = Run(core);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;  // exit 3: refused
  EXPECT_TRUE(absl::StrContains(s.message(), "reading the console's current release")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "not a release source name")) << s;
  EXPECT_FALSE(Exists("/var/lib/sandbox-node/install/pending.json"));
  EXPECT_FALSE(Exists("/usr/lib/sandbox-node"));
}

TEST_F(HostileCoreInstallTest, AHostileEnrollmentAnswerIsRefusedAndNothingIsRecorded) {
  const std::vector<release::testing::ArtifactBytes> host = {
      {"agent", "agent", "a"}, {"privhelper", "privhelper", "p"},
      {"native_helper", "native_helper", "n"}};
  release::testing::SignedRelease r = release::testing::MakeRelease(key_, "host-1", host);
  HostileCore core({{"/releases/current", 200, R"({"source":"host-1"})"},
                    {"/releases/host-1/manifest.json.sig", 200, r.signature_file},
                    {"/releases/host-1/manifest.json", 200, r.manifest_bytes},
                    {"/releases/host-1/SHA256SUMS", 200, r.sums},
                    {kEnrollPath, 201,
                     R"({"node_id":"../../root","credential":"\n\u001b]0;pwned\u0007",)"
                     R"("deployment_generation":1,"specification_digest":"zz",)"
                     R"("runtime_source":"e2e-1"})"}});
  ASSERT_TRUE(core.ok());
  absl::Status s = Run(core);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;  // exit 3: refused
  for (char c : std::string(s.message())) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << s;
  EXPECT_FALSE(Exists("/var/lib/sandbox-node/install/pending.json"));
  EXPECT_FALSE(Exists("/var/lib/sandbox-node/agent"));
}

}  // namespace
}  // namespace sn::install

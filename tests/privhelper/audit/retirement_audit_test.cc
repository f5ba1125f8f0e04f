// Retirement (issue 10) against the real privhelper executable, called as the agent's uid
// would: CollectGeneration refuses while an Execute call is in flight on the generation and
// while its native helper lives (until waitpid), asks an idle helper to stop, then drops the
// generation: its release files go, its lease, identity, final configuration and marker stay (its
// specification, plan and images record go), the daemon keeps the image, the
// generation takes no call again; hostile arguments are typed refusals on a connection that
// stays up; ListGenerations shows the helper and the lease holder without locking anything.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "tests/privhelper/audit/audit_fixture.h"
#include "tests/privhelper/audit/audit_test_base.h"

namespace sn::testing {
namespace {

// The entries of a directory (no "." or "..").
std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  return out;
}

class RetirementAuditTest : public RegisteredPrivhelperTest {
 protected:
  void SetUp() override {
    RegisteredPrivhelperTest::SetUp();
    if (IsSkipped()) return;
    SN_REQUIRE_DOCKERD();
    StartRegistered();
    digest_ = Sha256Hex(Slurp(ph_->File("spec-1.json")));
  }
  CallResult Collect(const std::string& request) {
    std::vector<CallResult> r =
        ph_->Attack({"--method=CollectGeneration", "--request=" + request});
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? CallResult{} : r[0];
  }
  CallResult Collect1() {
    return Collect(absl::StrCat("generation: 1 specification_digest: \"", digest_, "\""));
  }
  std::string List() {
    std::vector<CallResult> r = ph_->Attack({"--method=ListGenerations"});
    EXPECT_EQ(r.size(), 1u);
    EXPECT_EQ(r.empty() ? -1 : r[0].status, 0);
    return r.empty() ? "" : r[0].response;
  }
  std::string Gen(const std::string& name) const {
    return ph_->File("state/node/generations/" + name);
  }

  std::string digest_;
};

TEST_F(RetirementAuditTest, HostileArgumentsAreTypedRefusalsAndChangeNothing) {
  EXPECT_EQ(Collect("generation: 0").outcome, "COLLECT_OUTCOME_REFUSED");
  EXPECT_EQ(Collect(absl::StrCat("generation: -4 specification_digest: \"", digest_, "\""))
                .outcome,
            "COLLECT_OUTCOME_REFUSED");
  EXPECT_EQ(Collect("generation: 1 specification_digest: \"../../etc\"").outcome,
            "COLLECT_OUTCOME_REFUSED");
  CallResult other =
      Collect(absl::StrCat("generation: 1 specification_digest: \"", std::string(64, 'b'), "\""));
  EXPECT_EQ(other.outcome, "COLLECT_OUTCOME_REFUSED");
  EXPECT_EQ(other.diagnostic, "CONFIGURATION_INVALID");
  EXPECT_EQ(Collect(absl::StrCat("generation: 77 specification_digest: \"", digest_, "\""))
                .outcome,
            "COLLECT_OUTCOME_UNKNOWN");
  EXPECT_EQ(Execute(Request("inspect { sandbox_id: \"" + RandomUuid() + "\" }")).error_code,
            "ERROR_CODE_NONE")
      << "generation 1 still serves";
  EXPECT_TRUE(PathExists(ph_->File("state/releases/audit-1/busybox.tar")));
  EXPECT_EQ(ph_->CountLog("violation"), 0) << ph_->Log();
}

// A collect that a check refuses has no side effect: the generation's idle helper keeps
// running (the second audit: 30 collects with a wrong digest stopped 30 helpers).
TEST_F(RetirementAuditTest, ARefusedCollectLeavesTheIdleHelperRunning) {
  ASSERT_EQ(Execute(Request("inspect { sandbox_id: \"" + RandomUuid() + "\" }")).error_code,
            "ERROR_CODE_NONE")
      << ph_->Log();
  std::string listed = List();
  const size_t at = listed.find("helper_pids: ");
  ASSERT_NE(at, std::string::npos) << listed;
  const size_t digits = at + std::string("helper_pids: ").size();
  const std::string pid_line =
      listed.substr(at, listed.find_first_not_of("0123456789", digits) - at);
  ASSERT_GT(pid_line.size(), std::string("helper_pids: ").size()) << listed;
  for (int i = 0; i < 30; ++i) {
    CallResult wrong = Collect(
        absl::StrCat("generation: 1 specification_digest: \"", std::string(64, 'b'), "\""));
    ASSERT_EQ(wrong.outcome, "COLLECT_OUTCOME_REFUSED");
  }
  EXPECT_TRUE(absl::StrContains(List(), pid_line)) << "the helper was stopped: " << List();
  EXPECT_EQ(ph_->CountLog("native helper exited"), 0) << ph_->Log();
  EXPECT_EQ(ph_->CountLog("native helper of a generation being collected: stopping it"), 0)
      << ph_->Log();
}

// The second audit's store flood, as the agent's uid: BeginPreparation for ever new generation
// numbers (each a valid specification of the adopted release). Two are taken (PREPARING);
// every other one is refused storage_exhausted and writes nothing.
TEST_F(RetirementAuditTest, NewGenerationsBegunWithoutEndAreCappedAtTwoPreparing) {
  absl::StatusOr<wire::SpecificationDocument> base =
      wire::DecodeSpecificationDocument(Slurp(ph_->File("spec-1.json")));
  ASSERT_TRUE(base.ok()) << base.status();
  int begun = 0;
  int refused = 0;
  for (int64_t g = 2; g <= 41; ++g) {
    wire::SpecificationDocument d = *base;
    d.generation = g;
    const std::string spec = wire::EncodeSpecificationDocument(d);
    const std::string path = ph_->File(absl::StrCat("junk-", g, ".json"));
    { std::ofstream(path) << spec; }
    chmod(path.c_str(), 0644);
    std::vector<CallResult> r = ph_->Attack(
        {"--method=BeginPreparation", "--spec_file=" + path,
         absl::StrCat("--request=generation: ", g, " specification_digest: \"", Sha256Hex(spec),
                      "\"")});
    ASSERT_EQ(r.size(), 1u);
    if (r[0].diagnostic == "DIAGNOSTIC_UNSPECIFIED") {
      ++begun;
    } else {
      EXPECT_EQ(r[0].diagnostic, "STORAGE_EXHAUSTED") << g;
      EXPECT_FALSE(PathExists(Gen(absl::StrCat(g, ".specification")))) << g;
      ++refused;
    }
  }
  EXPECT_EQ(begun, 2);
  EXPECT_EQ(refused, 38);
  EXPECT_EQ(ph_->CountLog("violation"), 0) << ph_->Log();
  // Generation 1 still serves.
  EXPECT_EQ(Execute(Request("inspect { sandbox_id: \"" + RandomUuid() + "\" }")).error_code,
            "ERROR_CODE_NONE");
}

// The same flood with the drops that make room: each junk generation
// begun is collected at once, as a grant of Core's lets the agent do. Every one is begun (the
// dropped ones do not count against the caps) and dropped, and what stays on disk is one
// dropped marker each: no specification or plan. Generation 1's records are untouched.
TEST_F(RetirementAuditTest, JunkGenerationsBegunAndCollectedLeaveOnlyTheirMarkersOnDisk) {
  absl::StatusOr<wire::SpecificationDocument> base =
      wire::DecodeSpecificationDocument(Slurp(ph_->File("spec-1.json")));
  ASSERT_TRUE(base.ok()) << base.status();
  const std::vector<std::string> records_before = ListDir(Gen(""));
  constexpr int64_t kLast = 41;
  for (int64_t g = 2; g <= kLast; ++g) {
    wire::SpecificationDocument d = *base;
    d.generation = g;
    const std::string spec = wire::EncodeSpecificationDocument(d);
    const std::string digest = Sha256Hex(spec);
    const std::string path = ph_->File(absl::StrCat("junk-", g, ".json"));
    { std::ofstream(path) << spec; }
    chmod(path.c_str(), 0644);
    std::vector<CallResult> r = ph_->Attack(
        {"--method=BeginPreparation", "--spec_file=" + path,
         absl::StrCat("--request=generation: ", g, " specification_digest: \"", digest, "\"")});
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].diagnostic, "DIAGNOSTIC_UNSPECIFIED") << g << ph_->Log();
    ASSERT_TRUE(PathExists(Gen(absl::StrCat(g, ".specification")))) << g;
    CallResult dropped =
        Collect(absl::StrCat("generation: ", g, " specification_digest: \"", digest, "\""));
    ASSERT_EQ(dropped.outcome, "COLLECT_OUTCOME_DROPPED") << g << dropped.reason;
  }
  std::vector<std::string> now = ListDir(Gen(""));
  std::vector<std::string> expected = records_before;
  for (int64_t g = 2; g <= kLast; ++g) expected.push_back(absl::StrCat(g, ".dropped"));
  std::sort(now.begin(), now.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(now, expected);
  for (int64_t g = 2; g <= kLast; ++g) {
    struct stat st {};
    ASSERT_EQ(stat(Gen(absl::StrCat(g, ".dropped")).c_str(), &st), 0) << g;
    EXPECT_LT(st.st_size, 512) << g;
  }
  EXPECT_EQ(ph_->CountLog("violation"), 0) << ph_->Log();
  EXPECT_EQ(Execute(Request("inspect { sandbox_id: \"" + RandomUuid() + "\" }")).error_code,
            "ERROR_CODE_NONE")
      << "generation 1 still serves";
}

TEST_F(RetirementAuditTest, CallsInFlightAndLiveHelpersHoldTheGenerationUntilReaped) {
  const std::string sandbox = RandomUuid();
  ASSERT_EQ(Execute(Request(Create(sandbox))).error_code, "ERROR_CODE_NONE") << ph_->Log();
  // An exec runs for a few seconds; meanwhile collection is refused, with the reason.
  std::thread exec([&] {
    Execute(Request(absl::StrCat("exec { sandbox_id: \"", sandbox,
                                 "\" argv: \"sleep\" argv: \"3\" output_limit_bytes: 1024 }")));
  });
  bool seen = false;
  for (int i = 0; i < 200 && !seen; ++i) {  // bounded wait for the call to reach the helper
    seen = absl::StrContains(List(), "calls_in_flight: 1");
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(seen) << ph_->Log();
  std::string listed = List();
  EXPECT_TRUE(absl::StrContains(listed, "helper_pids: ")) << listed;
  EXPECT_TRUE(absl::StrContains(listed, "lease_holders: ")) << listed;
  CallResult held = Collect1();
  EXPECT_EQ(held.outcome, "COLLECT_OUTCOME_HELD");
  // The helper's shared lock on the lease is found first (the call's reference after it).
  EXPECT_TRUE(absl::StrContains(held.reason, "lease")) << held.reason;
  exec.join();
  // The helper is idle now: collection asks it to stop and refuses until it was reaped.
  CallResult result;
  for (int i = 0; i < 200; ++i) {
    result = Collect1();
    if (result.outcome != "COLLECT_OUTCOME_HELD") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(result.outcome, "COLLECT_OUTCOME_DROPPED") << result.reason << ph_->Log();
  EXPECT_EQ(result.state, "GENERATION_STATE_DROPPED");
  EXPECT_FALSE(PathExists(ph_->File("state/releases/audit-1/busybox.tar")));
  for (const char* kept : {"1.lease", "1.lease-identity", "1.json", "1.dropped"}) {
    EXPECT_TRUE(PathExists(Gen(kept))) << kept;
  }
  // Reclaimed once the marker was durable (issue #23, finding 3).
  for (const char* gone : {"1.specification", "1.preparing", "1.images"}) {
    EXPECT_FALSE(PathExists(Gen(gone))) << gone;
  }
  EXPECT_FALSE(PathExists(Gen("1.collecting")));
  EXPECT_TRUE(absl::StrContains(List(), "GENERATION_STATE_DROPPED"));
  // The generation takes no call again; the daemon keeps the image and the sandbox.
  EXPECT_EQ(Execute(Request("inspect { sandbox_id: \"" + sandbox + "\" }")).refusal,
            "REFUSAL_GENERATION_NOT_HELD");
  EXPECT_EQ(Containers(), 1u);
  docker::BeastDockerEngine e(kHostDockerSocket);
  docker::RequestOptions o;
  o.timeout = absl::Seconds(30);
  absl::StatusOr<docker::HttpResponse> image = e.Request("GET", "/images/" + image_ + "/json", "", o);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->status, 200) << "collection never removes a Docker image";
  // Again: idempotent.
  EXPECT_EQ(Collect1().outcome, "COLLECT_OUTCOME_DROPPED");
}

}  // namespace
}  // namespace sn::testing

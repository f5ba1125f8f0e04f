// Restart recovery (issue 11) against the real privhelper executable and the host's dockerd,
// called as the agent's uid: a generation whose image archive vanished from privhelper's store
// while it was down is reported NEEDS_REPAIR (runtime_missing) by Probe; create and a starting
// resume are refused NOT_READY (unconfirmed) while other operations still run; the repair
// through the ordinary preparation RPCs stores only that file and ends READY.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/privhelper/audit/audit_test_base.h"

namespace sn::testing {
namespace {

class RepairAuditTest : public RegisteredPrivhelperTest {
 protected:
  std::string Probe() {
    std::vector<CallResult> r = ph_->Attack({"--method=Probe", "--request=generation: 1"});
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? "" : r[0].response;
  }
  std::string Archive() const { return ph_->File("state/releases/audit-1/busybox.tar"); }
  // privhelper restarted after the stored image archive vanished while it was down.
  void RestartWithoutArchive() {
    ph_->Kill();
    ASSERT_EQ(unlink(Archive().c_str()), 0);
    ASSERT_TRUE(ph_->Restart()) << ph_->Log();
  }
};

TEST_F(RepairAuditTest, AMissingArchiveIsReportedRefusesCreateAndIsRepairedThroughPreparation) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  const std::string final_before = Slurp(ph_->File("state/node/generations/1.json"));
  ph_->Kill();
  ASSERT_EQ(unlink(Archive().c_str()), 0);
  ASSERT_TRUE(ph_->Restart()) << ph_->Log();

  const std::string probe = Probe();
  EXPECT_TRUE(absl::StrContains(probe, "GENERATION_STATE_NEEDS_REPAIR")) << probe;
  EXPECT_TRUE(absl::StrContains(probe, "diagnostic: RUNTIME_MISSING")) << probe;
  CallResult create = Execute(Request(Create(RandomUuid())));
  EXPECT_EQ(create.refusal, "REFUSAL_GENERATION_NOT_READY") << ph_->Log();
  EXPECT_EQ(create.error_code, "ERROR_CODE_UNCONFIRMED");
  CallResult resume = Execute(Request("resume { sandbox_id: \"" + RandomUuid() + "\" }"));
  EXPECT_EQ(resume.refusal, "REFUSAL_GENERATION_NOT_READY");
  CallResult inspect = Execute(Request("inspect { sandbox_id: \"" + RandomUuid() + "\" }"));
  EXPECT_NE(inspect.refusal, "REFUSAL_GENERATION_NOT_READY") << "held: other operations run";
  EXPECT_NE(inspect.refusal, "REFUSAL_GENERATION_NOT_HELD");
  EXPECT_EQ(Containers(), 0u);

  // The inspect's native helper holds the generation's lease (shared, for its whole life): a
  // repair waits (Unavailable, provider_unavailable) until it is gone.
  const std::string spec = ph_->File("spec-1.json");
  std::vector<CallResult> begin = ph_->Attack(
      {"--method=BeginPreparation", "--spec_file=" + spec,
       "--request=generation: 1 specification_digest: \"" + Sha256Hex(Slurp(spec)) + "\""});
  ASSERT_EQ(begin.size(), 1u);
  EXPECT_EQ(begin[0].diagnostic, "PROVIDER_UNAVAILABLE") << ph_->Log();
  EXPECT_EQ(begin[0].state, "GENERATION_STATE_NEEDS_REPAIR");
  std::vector<pid_t> helpers = ChildrenOf(ph_->pid());
  ASSERT_FALSE(helpers.empty()) << "the inspect ran on a native helper";
  for (pid_t h : helpers) kill(h, SIGKILL);
  // privhelper reaps it and closes its copy of the lease (a real process: polled).
  for (int i = 0; i < 200 && !ChildrenOf(ph_->pid()).empty(); ++i) usleep(50 * 1000);
  ASSERT_TRUE(ChildrenOf(ph_->pid()).empty());

  // The agent's repair: the same preparation steps; only the missing archive is uploaded.
  std::vector<CallResult> steps = ph_->PrepareBusybox(1);
  ASSERT_EQ(steps.size(), 4u) << ph_->Log();
  EXPECT_EQ(steps[1].missing, 1) << "Begin asks for exactly the missing file";
  EXPECT_EQ(steps.back().state, "GENERATION_STATE_READY") << ph_->Log();
  EXPECT_TRUE(PathExists(Archive()));
  EXPECT_EQ(Slurp(ph_->File("state/node/generations/1.json")), final_before);
  EXPECT_TRUE(absl::StrContains(Probe(), "GENERATION_STATE_READY"));
  EXPECT_EQ(Execute(Request(Create(RandomUuid()))).error_code, "ERROR_CODE_NONE") << ph_->Log();
  EXPECT_EQ(Containers(), 1u);
}

// The repair's own bounds, attacked as the agent's uid: an upload into a NEEDS_REPAIR
// generation before any repair began is refused, and a Begin with other specification bytes
// for the generation (a valid document, its own digest, one byte more) is refused
// configuration_invalid; nothing is stored and the generation stays NEEDS_REPAIR.
TEST_F(RepairAuditTest, AnUploadWithoutARepairOrAnotherSpecificationIsRefusedAndStoresNothing) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  ASSERT_NO_FATAL_FAILURE(RestartWithoutArchive());

  std::vector<CallResult> put = ph_->Attack(
      {"--method=PutArtifact", "--artifact_file=" + ph_->File("releases/audit-1/busybox.tar"),
       "--request=generation: 1 name: \"busybox.tar\""});
  ASSERT_EQ(put.size(), 1u);
  EXPECT_EQ(put[0].diagnostic, "CONFIGURATION_INVALID") << ph_->Log();
  EXPECT_EQ(ph_->CountLog("no preparation of this generation began"), 1) << ph_->Log();
  EXPECT_FALSE(PathExists(Archive())) << "no repair began: nothing is stored";

  const std::string other = ph_->File("spec-1-other.json");
  {
    std::ofstream out(other, std::ios::binary);
    out << Slurp(ph_->File("spec-1.json")) << " ";
  }
  ASSERT_EQ(chmod(other.c_str(), 0644), 0);
  std::vector<CallResult> begin = ph_->Attack(
      {"--method=BeginPreparation", "--spec_file=" + other,
       "--request=generation: 1 specification_digest: \"" + Sha256Hex(Slurp(other)) + "\""});
  ASSERT_EQ(begin.size(), 1u);
  EXPECT_EQ(begin[0].diagnostic, "CONFIGURATION_INVALID") << ph_->Log();
  EXPECT_EQ(begin[0].state, "GENERATION_STATE_NEEDS_REPAIR");
  EXPECT_EQ(ph_->CountLog("this generation is recorded with another specification"), 1)
      << ph_->Log();
  EXPECT_FALSE(PathExists(Archive()));
  EXPECT_TRUE(absl::StrContains(Probe(), "GENERATION_STATE_NEEDS_REPAIR"));
}

// An interrupted repair download resumes (issue 11): an upload cancelled before its half-close
// or suspended leaves privhelper holding its bytes, which Begin reports; the agent's uid can continue it
// only at exactly that offset. A wrong offset, an offset for an artifact without a partial
// and one beyond the declared size are refused configuration_invalid (each for its logged
// reason) and keep what is held; the right one publishes the whole verified archive.
TEST_F(RepairAuditTest, AResumedUploadIsTakenOnlyAtTheHeldOffset) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  ASSERT_NO_FATAL_FAILURE(RestartWithoutArchive());
  const std::string spec = ph_->File("spec-1.json");
  const std::string archive = ph_->File("releases/audit-1/busybox.tar");
  const size_t size = Slurp(archive).size();
  ASSERT_GT(size, 300u * 1024);
  auto begin = [&] {
    std::vector<CallResult> r = ph_->Attack(
        {"--method=BeginPreparation", "--spec_file=" + spec,
         "--request=generation: 1 specification_digest: \"" + Sha256Hex(Slurp(spec)) + "\""});
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? CallResult{} : r[0];
  };
  auto put = [&](uint64_t offset, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        "--method=PutArtifact", "--artifact_file=" + archive,
        "--artifact_from=" + std::to_string(offset),
        "--request=generation: 1 name: \"busybox.tar\" offset: " + std::to_string(offset)};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<CallResult> r = ph_->Attack(args);
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? CallResult{} : r[0];
  };
  const std::string partial = ph_->File("state/releases/audit-1/.busybox.tar.partial");
  CallResult b = begin();
  ASSERT_EQ(b.missing, 1) << ph_->Log();
  EXPECT_EQ(b.partial, 0);

  // An offset for an artifact of which nothing is held.
  EXPECT_EQ(put(4096).diagnostic, "CONFIGURATION_INVALID");
  EXPECT_TRUE(absl::StrContains(ph_->Log(), "holds no partial of it")) << ph_->Log();
  EXPECT_FALSE(PathExists(partial));
  // An upload cut after 200000 bytes (no half-close) keeps what privhelper's handler read of
  // them before it saw the cancel (how much depends on timing), and publishes nothing.
  put(0, {"--cancel_after_bytes=200000"});
  EXPECT_LE(begin().partial, 200000) << ph_->Log();
  EXPECT_FALSE(PathExists(Archive())) << "a partial never makes the file present";
  // An upload suspended after 200000 bytes (the agent's way to end one whose download broke)
  // leaves exactly them held: offset 0 discarded what the cut one left.
  put(0, {"--suspend_after_bytes=200000"});
  EXPECT_EQ(begin().partial, 200000) << ph_->Log();
  EXPECT_FALSE(PathExists(Archive())) << "a partial never makes the file present";
  // A wrong offset, and one beyond the declared size: refused, the partial kept.
  for (uint64_t wrong : {uint64_t{199999}, uint64_t{200001}, uint64_t{size + 100}}) {
    EXPECT_EQ(put(wrong).diagnostic, "CONFIGURATION_INVALID") << wrong;
    EXPECT_EQ(begin().partial, 200000) << wrong;
  }
  EXPECT_TRUE(absl::StrContains(ph_->Log(), "privhelper holds 200000 bytes of it")) << ph_->Log();
  // The held offset: the rest completes the archive, verified whole; the repair ends READY.
  CallResult resumed = put(200000);
  EXPECT_EQ(resumed.status, 0);
  EXPECT_EQ(resumed.diagnostic, "DIAGNOSTIC_UNSPECIFIED") << ph_->Log();
  EXPECT_FALSE(PathExists(partial));
  EXPECT_EQ(Slurp(Archive()), Slurp(archive));
  std::vector<CallResult> fin = ph_->Attack({"--method=FinishPreparation", "--request=generation: 1"});
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0].state, "GENERATION_STATE_READY") << ph_->Log();
}

}  // namespace
}  // namespace sn::testing

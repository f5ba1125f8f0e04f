// The agent's durable records as main 9855679 wrote them (tests/testdata/records) still read
// to the values they were written from, and today's writers still produce those bytes.
#include <stdlib.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/generations/pins.h"
#include "agent/generations/progress_file.h"
#include "agent/generations/retention_file.h"
#include "agent/requests/operation_record.h"
#include "agent/state/state_files.h"
#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "tests/common/record_strictness.h"

namespace sn::agent {
namespace {

constexpr char kInst[] = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
constexpr char kNode[] = "5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e";
constexpr char kBox[] = "22222222-2222-4222-8222-222222222222";
const std::string kD1(64, '1');
const std::string kD2(64, 'a');

std::string Golden(const std::string& name) { return ::sn::testing::GoldenRecord(name); }

absl::Time T(const char* rfc3339) {
  absl::Time t;
  std::string err;
  EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &err)) << err;
  return t;
}

class RecordGoldenTest : public ::testing::Test {
 protected:
  RecordGoldenTest() {
    char tmpl[] = "/tmp/agent-golden-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~RecordGoldenTest() override {
    if (system(("rm -rf " + dir_).c_str()) != 0) {}
  }
  std::string dir_;
};

NodeIdentity Identity() {
  return NodeIdentity{kNode, kInst, "docker", 7, kD1, "host-1.2.3", "https://core.example:8443"};
}

TEST_F(RecordGoldenTest, IdentityAndPendingEnrollmentReadAndAreWrittenAlike) {
  StateFiles files(dir_);
  ASSERT_TRUE(files.EnsureDirs().ok());
  ASSERT_TRUE(WriteFileAtomically(files.IdentityPath(), Golden("identity.json")).ok());
  ASSERT_TRUE(WriteFileAtomically(files.PendingEnrollmentPath(), Golden("identity.json")).ok());
  absl::StatusOr<NodeIdentity> id = files.ReadIdentity();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, Identity());
  absl::StatusOr<NodeIdentity> pending = files.ReadPendingEnrollment();
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(*pending, Identity());

  ASSERT_TRUE(files.WriteIdentity(Identity()).ok());
  ASSERT_TRUE(files.WritePendingEnrollment(Identity()).ok());
  EXPECT_EQ(*ReadSmallFile(files.IdentityPath()), Golden("identity.json"));
  EXPECT_EQ(*ReadSmallFile(files.PendingEnrollmentPath()), Golden("identity.json"));
}

TEST_F(RecordGoldenTest, OwnerEpochReadsAndIsWrittenAlike) {
  StateFiles files(dir_);
  ASSERT_TRUE(files.EnsureDirs().ok());
  ASSERT_TRUE(WriteFileAtomically(files.OwnerEpochPath(), Golden("owner_epoch")).ok());
  FileEpochStore epochs(files.OwnerEpochPath());
  EXPECT_EQ(*epochs.Load(), 41);
  ASSERT_TRUE(epochs.Store(41).ok());
  EXPECT_EQ(*ReadSmallFile(files.OwnerEpochPath()), Golden("owner_epoch"));
}

TEST_F(RecordGoldenTest, DeploymentPinsReadAndAreWrittenAlike) {
  const DeploymentPins pinned{GenerationRef{8, kD2}, GenerationRef{7, kD1}};
  absl::StatusOr<DeploymentPins> p = ParsePins(Golden("deployment.json"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, pinned);
  EXPECT_EQ(FormatPins(pinned), Golden("deployment.json"));
  absl::StatusOr<DeploymentPins> none = ParsePins(Golden("deployment-unpinned.json"));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, DeploymentPins{});
  EXPECT_EQ(FormatPins(DeploymentPins{}), Golden("deployment-unpinned.json"));
}

std::vector<RetentionStatus> Retention() {
  RetentionStatus collected;
  collected.ref = GenerationRef{5, kD2};
  collected.answered_at = T("2026-12-04T09:59:00Z");
  collected.keep = false;
  collected.granted_at = T("2026-12-04T09:59:30Z");
  collected.collection = "collected";
  RetentionStatus refused;
  refused.ref = GenerationRef{6, kD1};
  refused.collection = "refused";
  refused.reason = "a helper holds its lease";
  refused.diagnostic = Diagnostic::kOwnershipRefused;
  return {collected, refused};
}

TEST_F(RecordGoldenTest, RetentionRecordReadsAndIsWrittenAlike) {
  absl::StatusOr<std::vector<RetentionStatus>> r = ParseRetentionRecord(Golden("retention.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, Retention());
  EXPECT_EQ(FormatRetentionRecord(Retention(), T("2026-12-04T10:00:00.25Z")),
            Golden("retention.json"));
}

TEST_F(RecordGoldenTest, ProgressRecordsReadAndAreWrittenAlike) {
  const PreparationJob running_job{GenerationRef{5, kD2}, JobRole::kTarget};
  const PreparationProgress running{"downloading", "image.tar", 524288, 1048576};
  absl::StatusOr<ProgressRecord> r = ParseProgressRecord(Golden("5.progress.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->job, running_job);
  EXPECT_EQ(r->state, "running");
  EXPECT_FALSE(r->diagnostic.has_value());
  EXPECT_EQ(r->progress, running);
  EXPECT_EQ(r->updated_at, "2026-12-04T10:00:05.000Z");
  EXPECT_EQ(FormatProgressRecord(running_job, running, std::nullopt, T("2026-12-04T10:00:05Z")),
            Golden("5.progress.json"));

  const PreparationJob failed_job{GenerationRef{6, kD1}, JobRole::kOther};
  const PreparationProgress failed{"verifying", "helper", 0, 4096};
  absl::StatusOr<ProgressRecord> f = ParseProgressRecord(Golden("6.progress.json"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->job, failed_job);
  EXPECT_EQ(f->state, "failed");
  EXPECT_EQ(f->diagnostic, Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(f->progress, failed);
  PreparationOutcome outcome;
  outcome.failure = Diagnostic::kRuntimeDownloadFailed;
  EXPECT_EQ(FormatProgressRecord(failed_job, failed, outcome, T("2026-12-04T10:01:00Z")),
            Golden("6.progress.json"));
}

RecordEntry Completed() {
  RecordEntry e;
  e.id = "11111111-1111-4111-8111-111111111111";
  e.operation = "create";
  e.sandbox_id = kBox;
  e.generation = 7;
  e.state = RecordState::kCompleted;
  e.accepted_at = absl::FromUnixMillis(1764000000000);
  e.completed_at = absl::FromUnixMillis(1764000001500);
  wire::RecordedResponse r;
  r.id = e.id;
  r.result = wire::MutationResult(wire::CreateResult{kBox, "native-1"});
  e.response = r;
  return e;
}

RecordEntry Queued() {
  RecordEntry e;
  e.id = "33333333-3333-4333-8333-333333333333";
  e.operation = "kill";
  e.sandbox_id = kBox;
  e.generation = 7;
  e.state = RecordState::kQueued;
  e.accepted_at = absl::FromUnixMillis(1764000002000);
  return e;
}

RecordEntry Uncertain() {
  RecordEntry e;
  e.id = "44444444-4444-4444-8444-444444444444";
  e.operation = "exec";
  e.sandbox_id = kBox;
  e.generation = 7;
  e.state = RecordState::kCompleted;
  e.accepted_at = absl::FromUnixMillis(1764000003000);
  e.completed_at = absl::FromUnixMillis(1764000004000);
  wire::RecordedResponse r;
  r.id = e.id;
  r.error_code = "uncertain";
  e.response = r;
  return e;
}

void ExpectSame(const RecordEntry& got, const RecordEntry& want) {
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(got.operation, want.operation);
  EXPECT_EQ(got.sandbox_id, want.sandbox_id);
  EXPECT_EQ(got.generation, want.generation);
  EXPECT_EQ(got.state, want.state);
  EXPECT_EQ(got.accepted_at, want.accepted_at);
  EXPECT_EQ(got.completed_at, want.completed_at);
  EXPECT_EQ(got.response, want.response);
}

TEST_F(RecordGoldenTest, OperationRecordsReadAndAreWrittenAlike) {
  for (const auto& [name, entry] : {std::pair{"operation-completed.json", Completed()},
                                    std::pair{"operation-queued.json", Queued()},
                                    std::pair{"operation-uncertain.json", Uncertain()}}) {
    SCOPED_TRACE(name);
    absl::StatusOr<RecordEntry> e = DecodeRecordEntry(Golden(name));
    ASSERT_TRUE(e.ok()) << e.status();
    ExpectSame(*e, entry);
    EXPECT_EQ(EncodeRecordEntry(entry), Golden(name));
  }
}

// The strict record reader's rules over the agent's records (tests/common/record_strictness.h):
// refused with DataLoss naming the member.
class RecordStrictnessTest : public RecordGoldenTest {
 protected:
  std::vector<::sn::testing::StrictRecordCase> Cases() {
    auto identity = [this](const std::string& text) {
      StateFiles files(dir_);
      EXPECT_TRUE(files.EnsureDirs().ok());
      EXPECT_TRUE(WriteFileAtomically(files.IdentityPath(), text).ok());
      return files.ReadIdentity().status();
    };
    return {
        {"identity.json", R"("provider":"docker",)", "", identity},
        {"deployment.json", R"("schema":1,)", R"("specification_digest":)",
         [](const std::string& t) { return ParsePins(t).status(); }},
        {"retention.json", R"("updated_at":"2026-12-04T10:00:00Z",)", R"("reason":)",
         [](const std::string& t) { return ParseRetentionRecord(t).status(); }},
        {"5.progress.json", R"("phase":"x",)", "",
         [](const std::string& t) { return ParseProgressRecord(t).status(); }},
        {"operation-completed.json", R"("state":"queued",)", "",
         [](const std::string& t) { return DecodeRecordEntry(t).status(); }},
    };
  }
};

TEST_F(RecordStrictnessTest, EveryRecordRefusesADuplicateMemberByName) {
  ::sn::testing::ExpectDuplicateMembersRefused(Cases(), absl::StatusCode::kDataLoss);
}

TEST_F(RecordStrictnessTest, EveryRecordRefusesAnUnknownMemberByName) {
  ::sn::testing::ExpectUnknownMembersRefused(Cases(), absl::StatusCode::kDataLoss);
}

// A record cut short, or of another schema, is torn or foreign, not malformed.
TEST_F(RecordStrictnessTest, EveryRecordCutShortIsTornOrForeign) {
  ::sn::testing::ExpectCutShortRefused(Cases(), absl::StatusCode::kDataLoss,
                                 /*schema_required=*/false);
}

}  // namespace
}  // namespace sn::agent

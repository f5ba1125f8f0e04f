// The durable operation record: round trip, restart recovery, retention, torn files.
#include "agent/requests/operation_record.h"

#include <stdlib.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "gtest/gtest.h"

namespace sn::agent {
namespace {

constexpr char kId[] = "11111111-1111-4111-8111-111111111111";
constexpr char kBox[] = "22222222-2222-4222-8222-222222222222";

class OperationRecordTest : public ::testing::Test {
 protected:
  OperationRecordTest() {
    char tmpl[] = "/tmp/agent-or-XXXXXX";
    dir_ = std::string(mkdtemp(tmpl)) + "/operations";
  }
  ~OperationRecordTest() override {
    if (system(("rm -rf " + dir_.substr(0, dir_.rfind('/'))).c_str()) != 0) {}
  }
  std::string dir_;
  SimulatedClock clock_;
};

TEST_F(OperationRecordTest, CompletedOutcomeSurvivesARestart) {
  {
    OperationRecord r(dir_, &clock_);
    ASSERT_TRUE(r.Recover(absl::Hours(48)).ok());
    ASSERT_TRUE(r.Accept(kId, "create", kBox, 7).ok());
    ASSERT_TRUE(r.MarkRunning(kId).ok());
    wire::RecordedResponse resp;
    resp.id = kId;
    resp.result = wire::MutationResult(wire::CreateResult{kBox, "native-1"});
    ASSERT_TRUE(r.Complete(kId, resp).ok());
  }
  OperationRecord again(dir_, &clock_);
  ASSERT_TRUE(again.Recover(absl::Hours(48)).ok());
  const RecordEntry* e = again.Find(kId);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, RecordState::kCompleted);
  EXPECT_EQ(e->operation, "create");
  EXPECT_EQ(e->generation, 7);
  EXPECT_EQ(std::get<wire::CreateResult>(*e->response->result).native_id, "native-1");
}

TEST_F(OperationRecordTest, CompletedEntriesOutliveADayAndAreDroppedAfterRetention) {
  {
    OperationRecord r(dir_, &clock_);
    ASSERT_TRUE(r.Recover(absl::Hours(48)).ok());
    ASSERT_TRUE(r.Accept(kId, "kill", kBox, 7).ok());
    ASSERT_TRUE(r.Complete(kId, wire::RecordedResponse{kId, std::nullopt, std::nullopt,
                                                       std::nullopt, std::nullopt})
                    .ok());
  }
  clock_.Advance(absl::Hours(25));
  {
    OperationRecord r(dir_, &clock_);
    ASSERT_TRUE(r.Recover(absl::Hours(48)).ok());
    EXPECT_NE(r.Find(kId), nullptr);
  }
  clock_.Advance(absl::Hours(24));
  OperationRecord r(dir_, &clock_);
  ASSERT_TRUE(r.Recover(absl::Hours(48)).ok());
  EXPECT_EQ(r.Find(kId), nullptr);
}

wire::RecordedResponse Ok(const std::string& id) {
  return wire::RecordedResponse{id, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
}

std::string Id(int n) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-0000-4000-8000-%012x", n, n);
  return buf;
}

// Finding 11: the running agent prunes on a timer, without waiting for a restart.
TEST_F(OperationRecordTest, CompletedRecordsArePrunedWhileRunningAfterTheRetention) {
  OperationRecord r(dir_, &clock_);
  ASSERT_TRUE(r.Recover().ok());
  r.PruneEvery(&clock_, kRecordPruneInterval);
  ASSERT_TRUE(r.Accept(kId, "kill", kBox, 7).ok());
  ASSERT_TRUE(r.Complete(kId, Ok(kId)).ok());
  EXPECT_TRUE(r.KilledWithinWindow(kBox));
  const std::string path = dir_ + "/" + kId + ".json";
  clock_.Advance(absl::Hours(47));
  EXPECT_NE(r.Find(kId), nullptr);
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  clock_.Advance(absl::Hours(1) + kRecordPruneInterval);
  EXPECT_EQ(r.Find(kId), nullptr);
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  EXPECT_FALSE(r.KilledWithinWindow(kBox));  // the window is the record's
  EXPECT_EQ(r.size(), 0u);
}

TEST_F(OperationRecordTest, PruningNeverRemovesARecordYoungerThanADayNorAnUnfinishedOne) {
  OperationRecord r(dir_, &clock_);
  ASSERT_TRUE(r.Recover().ok());
  ASSERT_TRUE(r.Accept(Id(1), "kill", kBox, 7).ok());
  ASSERT_TRUE(r.Complete(Id(1), Ok(Id(1))).ok());
  ASSERT_TRUE(r.Accept(Id(2), "exec", kBox, 7).ok());
  ASSERT_TRUE(r.MarkRunning(Id(2)).ok());  // accepted long ago, still running
  clock_.Advance(absl::Hours(23));
  EXPECT_EQ(r.Prune(absl::Minutes(1)), 0u);  // raised to the spec's 24 h
  EXPECT_NE(r.Find(Id(1)), nullptr);
  clock_.Advance(absl::Hours(2));
  EXPECT_EQ(r.Prune(absl::Minutes(1)), 1u);
  EXPECT_EQ(r.Find(Id(1)), nullptr);
  clock_.Advance(absl::Hours(1000));
  EXPECT_EQ(r.Prune(kMinRecordRetention), 0u);
  EXPECT_EQ(r.Find(Id(2))->state, RecordState::kRunning);
}

TEST_F(OperationRecordTest, AtTheBoundAcceptWritesNothingUntilADayOldRecordCanGo) {
  OperationRecord r(dir_, &clock_, /*max_records=*/2);
  ASSERT_TRUE(r.Recover().ok());
  ASSERT_TRUE(r.Accept(Id(1), "kill", kBox, 7).ok());
  ASSERT_TRUE(r.Accept(Id(2), "kill", kBox, 7).ok());
  clock_.Advance(absl::Hours(30));
  // Unfinished records are never made room from, however old.
  absl::Status full = r.Accept(Id(3), "kill", kBox, 7);
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_NE(access((dir_ + "/" + Id(3) + ".json").c_str(), F_OK), 0);
  // The retention counts from completion, not acceptance.
  ASSERT_TRUE(r.Complete(Id(1), Ok(Id(1))).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(r.Accept(Id(3), "kill", kBox, 7)));
  clock_.Advance(absl::Hours(24) + absl::Seconds(1));
  ASSERT_TRUE(r.Accept(Id(3), "kill", kBox, 7).ok());
  EXPECT_EQ(r.Find(Id(1)), nullptr);
  EXPECT_EQ(r.size(), 2u);
}

TEST_F(OperationRecordTest, TornFileIsLeftForInspectionAndIgnored) {
  ASSERT_TRUE(MakeDirs(dir_).ok());
  const std::string path = dir_ + "/" + kId + ".json";
  ASSERT_TRUE(WriteFileAtomically(path, "{\"id\":").ok());
  OperationRecord r(dir_, &clock_);
  ASSERT_TRUE(r.Recover(absl::Hours(48)).ok());
  EXPECT_EQ(r.Find(kId), nullptr);
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
}

TEST_F(OperationRecordTest, EntryFormatRoundTrips) {
  RecordEntry e;
  e.id = kId;
  e.operation = "exec";
  e.sandbox_id = kBox;
  e.generation = 3;
  e.state = RecordState::kCompleted;
  e.accepted_at = absl::FromUnixMillis(1000);
  e.completed_at = absl::FromUnixMillis(2000);
  e.response = ForRecord(wire::RecordedResponse{
      kId, wire::MutationResult(wire::ExecResult{2, "out", "err", false}), std::nullopt,
      std::nullopt, std::nullopt});
  absl::StatusOr<RecordEntry> back = DecodeRecordEntry(EncodeRecordEntry(e));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->response, e.response);
  const auto& exec = std::get<wire::ExecResult>(*back->response->result);
  EXPECT_TRUE(exec.stdout_bytes.empty());
  EXPECT_TRUE(exec.truncated);
}

}  // namespace
}  // namespace sn::agent

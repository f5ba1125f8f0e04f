// The durable operation record: round trip, restart recovery, retention, torn files.
#include "agent/operation_record.h"

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

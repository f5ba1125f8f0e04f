// The durable operation record: round trip, restart recovery, retention, torn files.
#include "agent/requests/operation_record.h"

#include <stdlib.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "tests/fakes/fault_fs.h"
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
  clock_.Advance(absl::Hours(47));
  EXPECT_NE(r.Find(kId), nullptr);
  clock_.Advance(absl::Hours(1) + kRecordPruneInterval);
  EXPECT_EQ(r.Find(kId), nullptr);
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
  {
    OperationRecord again(dir_, &clock_);
    ASSERT_TRUE(again.Recover().ok());
    EXPECT_EQ(again.Find(Id(3)), nullptr);  // nothing was written
  }
  // The retention counts from completion, not acceptance.
  ASSERT_TRUE(r.Complete(Id(1), Ok(Id(1))).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(r.Accept(Id(3), "kill", kBox, 7)));
  clock_.Advance(absl::Hours(24) + absl::Seconds(1));
  ASSERT_TRUE(r.Accept(Id(3), "kill", kBox, 7).ok());
  EXPECT_EQ(r.Find(Id(1)), nullptr);
  EXPECT_EQ(r.size(), 2u);
}

TEST_F(OperationRecordTest, ATornFileOfTheEarlierFormatIsLeftForInspectionAndIgnored) {
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

// The journal (finding 4 of the chaos soak: the one-file-per-record format's 32768 records
// ended availability after 38 minutes of a 10-mutation-a-second load): far more records than
// that fit, each in a few hundred bytes of journal, and all read again at the next start.
class JournalTest : public ::testing::Test {
 protected:
  JournalTest() { EXPECT_TRUE(fs_.MakeDirs("state").ok()); }
  OperationRecord Record(size_t max = kMaxOperationRecords, size_t segment_bytes = 64 << 10) {
    return OperationRecord(kDir, &clock_, max, &fs_, segment_bytes);
  }
  std::vector<std::string> Segments() {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<std::string>> names = fs_.Names(kDir);
    if (names.ok()) {
      for (const std::string& n : *names) {
        if (n.rfind("journal-", 0) == 0) out.push_back(n);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static constexpr char kDir[] = "/state/operations";
  fs::FaultFs fs_;
  SimulatedClock clock_;
};

TEST_F(JournalTest, ManyMoreRecordsThanTheEarlierBoundFitAndAllReadAgain) {
  constexpr int kRecords = 40000;  // the earlier format held at most 32768
  {
    OperationRecord r = Record();
    ASSERT_TRUE(r.Recover().ok());
    for (int i = 0; i < kRecords; ++i) {
      ASSERT_TRUE(r.Accept(Id(i), "exec", kBox, 7).ok()) << i;
      ASSERT_TRUE(r.MarkRunning(Id(i)).ok());
      ASSERT_TRUE(r.Complete(Id(i), Ok(Id(i))).ok());
    }
    EXPECT_EQ(r.size(), static_cast<size_t>(kRecords));
    // Three lines of about 200 bytes each per record, not a 4 KiB block.
    EXPECT_LT(r.journal_bytes(), kRecords * uint64_t{1024});
    EXPECT_GT(r.segments(), 10u);  // rotated at 64 KiB
  }
  OperationRecord again = Record();
  ASSERT_TRUE(again.Recover().ok());
  EXPECT_EQ(again.size(), static_cast<size_t>(kRecords));
  for (int i = 0; i < kRecords; i += 997) {
    const RecordEntry* e = again.Find(Id(i));
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(e->state, RecordState::kCompleted);
    EXPECT_EQ(e->response, Ok(Id(i)));
  }
}

TEST_F(JournalTest, SegmentsNoRecordNeedsAreRemovedOldestFirst) {
  OperationRecord r = Record(kMaxOperationRecords, /*segment_bytes=*/4096);
  ASSERT_TRUE(r.Recover().ok());
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(r.Accept(Id(i), "kill", kBox, 7).ok());
    ASSERT_TRUE(r.Complete(Id(i), Ok(Id(i))).ok());
  }
  const size_t before = Segments().size();
  EXPECT_GT(before, 20u);
  clock_.Advance(absl::Hours(30));
  ASSERT_TRUE(r.Accept(Id(1000), "exec", kBox, 7).ok());  // newer, still running
  EXPECT_EQ(r.Prune(kRecordRetention), 0u);
  EXPECT_EQ(Segments().size(), before);
  clock_.Advance(absl::Hours(19));
  EXPECT_EQ(r.Prune(kRecordRetention), 300u);
  ASSERT_TRUE(r.TakeDeferredError().ok());
  // Every segment before the running record's is gone, on disk as in memory.
  EXPECT_EQ(Segments().size(), r.segments());
  EXPECT_LE(Segments().size(), 2u);
  OperationRecord again = Record(kMaxOperationRecords, 4096);
  ASSERT_TRUE(again.Recover().ok());
  EXPECT_EQ(again.size(), 1u);
  EXPECT_EQ(again.Find(Id(1000))->response->error_code, "unavailable");
}

TEST_F(JournalTest, AnUnfinishedAppendIsIgnoredAndNeverReadAsPartOfALaterSegment) {
  {
    OperationRecord r = Record();
    ASSERT_TRUE(r.Recover().ok());
    ASSERT_TRUE(r.Accept(kId, "create", kBox, 7).ok());
  }
  std::vector<std::string> segs = Segments();
  ASSERT_EQ(segs.size(), 1u);
  const std::string path = absl::StrCat(kDir, "/", segs[0]);
  absl::StatusOr<std::string> text = fs_.Contents(path);
  ASSERT_TRUE(text.ok());
  // A crash cut the running line in the middle.
  ASSERT_TRUE(fs_.WriteFile(path, *text + "{\"accepted_at_unix_ms\":17,\"gen").ok());
  for (int start = 0; start < 3; ++start) {
    OperationRecord r = Record();
    ASSERT_TRUE(r.Recover().ok()) << start;
    const RecordEntry* e = r.Find(kId);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->response->error_code, "unavailable");  // it was queued
  }
}

TEST_F(JournalTest, ADamagedSealedSegmentRefusesTheStartInsteadOfForgettingOutcomes) {
  {
    OperationRecord r = Record(kMaxOperationRecords, /*segment_bytes=*/1);  // a segment a line
    ASSERT_TRUE(r.Recover().ok());
    ASSERT_TRUE(r.Accept(kId, "kill", kBox, 7).ok());
    ASSERT_TRUE(r.Complete(kId, Ok(kId)).ok());
  }
  // Segments: the start's (header only), the accept's, the completion's (the newest).
  std::vector<std::string> segs = Segments();
  ASSERT_EQ(segs.size(), 3u);
  const std::string path = absl::StrCat(kDir, "/", segs[1]);  // sealed by segs[2]
  absl::StatusOr<std::string> text = fs_.Contents(path);
  ASSERT_TRUE(text.ok());
  const size_t at = text->find("\"kill\"");
  ASSERT_NE(at, std::string::npos) << *text;
  std::string damaged = *text;
  damaged[at + 1] = '\x01';
  ASSERT_TRUE(fs_.WriteFile(path, damaged).ok());
  OperationRecord r = Record();
  absl::Status st = r.Recover();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(st.message().find(segs[1]), std::string::npos) << st;
  // Shorter than its sealed length: the same.
  ASSERT_TRUE(fs_.WriteFile(path, text->substr(0, text->size() - 1)).ok());
  OperationRecord r2 = Record();
  EXPECT_TRUE(absl::IsDataLoss(r2.Recover()));
  // As written, it reads.
  ASSERT_TRUE(fs_.WriteFile(path, *text).ok());
  OperationRecord r3 = Record();
  ASSERT_TRUE(r3.Recover().ok());
  EXPECT_EQ(r3.Find(kId)->response, Ok(kId));
}

TEST_F(JournalTest, AFewRecordsPinningAnOldSegmentAreCopiedForwardWhenTheJournalFills) {
  // 1024 records allowed: 1 MiB of journal; 8 KiB segments.
  OperationRecord r = Record(/*max=*/1024, /*segment_bytes=*/8192);
  ASSERT_TRUE(r.Recover().ok());
  ASSERT_TRUE(r.Accept(kId, "exec", kBox, 7).ok());  // runs for the whole test
  ASSERT_TRUE(r.MarkRunning(kId).ok());
  int n = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 1000; ++i, ++n) {
      absl::Status st = r.Accept(Id(n), "kill", kBox, 7);
      ASSERT_TRUE(st.ok()) << n << " " << st << " bytes " << r.journal_bytes();
      ASSERT_TRUE(r.Complete(Id(n), Ok(Id(n))).ok());
      clock_.Advance(absl::Seconds(120));
    }
  }
  // Bounded by the byte bound although the running record's segment is the oldest.
  EXPECT_LE(r.journal_bytes(), 1024u * 1024u);
  OperationRecord again = Record(1024, 8192);
  ASSERT_TRUE(again.Recover().ok());
  ASSERT_NE(again.Find(kId), nullptr);
  EXPECT_EQ(again.Find(kId)->response->error_code, "uncertain");
}

}  // namespace
}  // namespace sn::agent

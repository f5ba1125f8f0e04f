// The preparation scheduler on SimulatedClock with a fake preparer: order, serialization,
// the 30-minute deadline, the 1/2/5/10/30-minute backoff, cancellation of a superseded or
// paused attempt, and rate-limited progress.
#include "agent/generations/scheduler.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/agent/fakes/fake_preparer.h"

namespace sn::agent {
namespace {

using testing::FakePreparer;

PreparationJob Job(int64_t g, JobRole role = JobRole::kTarget, char digest = 'a') {
  return PreparationJob{GenerationRef{g, std::string(64, digest)}, role};
}

struct Finished {
  PreparationJob job;
  PreparationOutcome outcome;
  PreparationProgress last;
};

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest()
      : scheduler_(&clock_, &clock_, &preparer_,
                   [this](const PreparationJob& j, const PreparationOutcome& o,
                          const PreparationProgress& p) { finished_.push_back({j, o, p}); },
                   [this](const PreparationJob&, const PreparationProgress& p) {
                     reported_.push_back(p);
                   }) {}

  SimulatedClock clock_;
  FakePreparer preparer_;
  std::vector<Finished> finished_;
  std::vector<PreparationProgress> reported_;
  PreparationScheduler scheduler_;
};

TEST_F(SchedulerTest, PreparationsAreSerializedInTheGivenOrder) {
  scheduler_.SetWanted({Job(3, JobRole::kTarget), Job(2, JobRole::kServing),
                        Job(9, JobRole::kOther)});
  ASSERT_EQ(preparer_.attempts.size(), 1u);
  EXPECT_EQ(preparer_.last().job.ref.generation, 3);
  EXPECT_EQ(scheduler_.Find(3)->phase, PreparationScheduler::Phase::kRunning);
  EXPECT_EQ(scheduler_.Find(2)->phase, PreparationScheduler::Phase::kQueued);
  preparer_.Succeed();
  ASSERT_EQ(preparer_.attempts.size(), 2u);
  EXPECT_EQ(preparer_.last().job.ref.generation, 2);
  EXPECT_EQ(preparer_.running(), 1);
  EXPECT_EQ(scheduler_.Find(3), nullptr);  // done: no longer an entry
  preparer_.Succeed();
  EXPECT_EQ(preparer_.last().job.ref.generation, 9);
  preparer_.Succeed();
  EXPECT_EQ(preparer_.attempts.size(), 3u);
  EXPECT_FALSE(scheduler_.busy());
  ASSERT_EQ(finished_.size(), 3u);
  EXPECT_FALSE(finished_[0].outcome.failure.has_value());
}

TEST_F(SchedulerTest, FailuresBackOffOneTwoFiveTenThenThirtyMinutes) {
  scheduler_.SetWanted({Job(5)});
  const absl::Duration expected[] = {absl::Minutes(1), absl::Minutes(2), absl::Minutes(5),
                                     absl::Minutes(10), absl::Minutes(30), absl::Minutes(30),
                                     absl::Minutes(30)};
  for (absl::Duration wait : expected) {
    const size_t before = preparer_.attempts.size();
    preparer_.Fail(Diagnostic::kRuntimeDownloadFailed);
    EXPECT_EQ(scheduler_.Find(5)->phase, PreparationScheduler::Phase::kBackoff);
    EXPECT_EQ(scheduler_.Find(5)->last_failure, Diagnostic::kRuntimeDownloadFailed);
    clock_.Advance(wait - absl::Seconds(1));
    EXPECT_EQ(preparer_.attempts.size(), before) << "retried before " << wait;
    clock_.Advance(absl::Seconds(1));
    EXPECT_EQ(preparer_.attempts.size(), before + 1) << "not retried after " << wait;
  }
  // A success forgets the count: a later failure of the same generation waits 1 minute again.
  preparer_.Succeed();
  scheduler_.SetWanted({Job(5)});
  preparer_.Fail(Diagnostic::kProviderUnavailable);
  EXPECT_EQ(scheduler_.Find(5)->failures, 1);
  EXPECT_EQ(scheduler_.Find(5)->retry_at, clock_.Monotonic() + absl::Minutes(1));
}

TEST_F(SchedulerTest, AGenerationInBackoffDoesNotHoldUpTheNext) {
  scheduler_.SetWanted({Job(5), Job(4, JobRole::kServing)});
  preparer_.Fail(Diagnostic::kRuntimeDownloadFailed);
  ASSERT_EQ(preparer_.attempts.size(), 2u);
  EXPECT_EQ(preparer_.last().job.ref.generation, 4);
  preparer_.Succeed();
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(preparer_.last().job.ref.generation, 5);
}

TEST_F(SchedulerTest, AnAttemptPastItsThirtyMinuteDeadlineIsCancelledAndEndsPreparationTimeout) {
  scheduler_.SetWanted({Job(6)});
  clock_.Advance(absl::Minutes(30) - absl::Milliseconds(1));
  EXPECT_FALSE(preparer_.last().cancelled);
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(preparer_.last().cancelled);
  // The attempt still occupies the slot until it has ended.
  EXPECT_TRUE(scheduler_.busy());
  preparer_.Fail(Diagnostic::kPreparationCancelled);
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_EQ(finished_[0].outcome.failure, Diagnostic::kPreparationTimeout);
  EXPECT_EQ(scheduler_.Find(6)->last_failure, Diagnostic::kPreparationTimeout);
  EXPECT_EQ(scheduler_.Find(6)->failures, 1);  // a timeout counts: backoff
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(preparer_.attempts.size(), 2u);
}

TEST_F(SchedulerTest, ASupersededTargetIsCancelledAndTheNewOneRunsOnceItEnded) {
  scheduler_.SetWanted({Job(7)});
  scheduler_.SetWanted({Job(8)});
  EXPECT_TRUE(preparer_.attempts[0]->cancelled);
  EXPECT_EQ(preparer_.attempts.size(), 1u);  // serialized: 8 waits for 7 to end
  preparer_.Fail(Diagnostic::kPreparationCancelled);
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_EQ(finished_[0].job.ref.generation, 7);
  EXPECT_EQ(finished_[0].outcome.failure, Diagnostic::kPreparationCancelled);
  ASSERT_EQ(preparer_.attempts.size(), 2u);
  EXPECT_EQ(preparer_.last().job.ref.generation, 8);
  // The same number with another digest is another job, too.
  scheduler_.SetWanted({Job(8, JobRole::kTarget, 'b')});
  EXPECT_TRUE(preparer_.attempts[1]->cancelled);
}

TEST_F(SchedulerTest, ACancelledAttemptThatSucceededAnywayIsASuccess) {
  scheduler_.SetWanted({Job(7)});
  scheduler_.SetWanted({});
  preparer_.Succeed();
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_FALSE(finished_[0].outcome.failure.has_value());
}

TEST_F(SchedulerTest, PauseCancelsWithoutBackoffAndNothingStartsUntilResume) {
  scheduler_.SetWanted({Job(7), Job(3, JobRole::kServing)});
  scheduler_.Pause();
  EXPECT_TRUE(preparer_.last().cancelled);
  preparer_.Fail(Diagnostic::kPreparationCancelled);
  EXPECT_EQ(finished_.back().outcome.failure, Diagnostic::kPreparationCancelled);
  EXPECT_EQ(preparer_.attempts.size(), 1u);  // paused: 3 does not start
  EXPECT_EQ(scheduler_.Find(7)->phase, PreparationScheduler::Phase::kQueued);
  EXPECT_EQ(scheduler_.Find(7)->failures, 0);
  clock_.Advance(absl::Hours(2));
  EXPECT_EQ(preparer_.attempts.size(), 1u);
  scheduler_.Resume();
  ASSERT_EQ(preparer_.attempts.size(), 2u);
  EXPECT_EQ(preparer_.last().job.ref.generation, 7);  // at once: a cancellation is no failure
}

TEST_F(SchedulerTest, BackoffStateSurvivesAPause) {
  scheduler_.SetWanted({Job(7)});
  preparer_.Fail(Diagnostic::kRuntimeDownloadFailed);
  scheduler_.Pause();
  scheduler_.Resume();
  EXPECT_EQ(preparer_.attempts.size(), 1u);  // still waiting its minute
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(preparer_.attempts.size(), 2u);
}

TEST_F(SchedulerTest, ProgressIsKeptAndReportedAtPhaseChangesAndEveryFiveSeconds) {
  // Steps of less than a tenth of the bytes: only phases and time make lines.
  scheduler_.SetWanted({Job(7)});
  auto progress = [&](const char* phase, int64_t done) {
    preparer_.last().progress(PreparationProgress{phase, "image.tar", done, 100});
  };
  progress("upload", 1);
  progress("upload", 2);
  clock_.Advance(absl::Seconds(4));
  progress("upload", 3);
  EXPECT_EQ(scheduler_.Find(7)->progress->bytes_done, 3);
  EXPECT_EQ(reported_.size(), 1u);
  clock_.Advance(absl::Seconds(1));
  progress("upload", 4);
  progress("import", 100);
  ASSERT_EQ(reported_.size(), 3u);
  EXPECT_EQ(reported_[1].bytes_done, 4);
  EXPECT_EQ(reported_[2].phase, "import");
  preparer_.Succeed();
  EXPECT_EQ(finished_[0].last.phase, "import");
}

TEST_F(SchedulerTest, EachArtifactsUploadIsReportedWhenItStartsThenEveryFiveSeconds) {
  scheduler_.SetWanted({Job(7)});
  auto progress = [&](const char* artifact, int64_t done) {
    preparer_.last().progress(PreparationProgress{"upload", artifact, done, 100});
  };
  progress("image.tar", 0);
  progress("image.tar", 6);
  progress("helper", 6);  // the next artifact starts within the 5 s: reported at once
  progress("helper", 9);
  ASSERT_EQ(reported_.size(), 2u);
  EXPECT_EQ(reported_[1].artifact, "helper");
  EXPECT_EQ(reported_[1].bytes_done, 6);
  clock_.Advance(absl::Seconds(5));
  progress("helper", 12);
  ASSERT_EQ(reported_.size(), 3u);
  EXPECT_EQ(reported_[2].bytes_done, 12);
}

TEST_F(SchedulerTest, FastBytesAreReportedAtEveryTenthAndAtTheEndNotAtEveryUpdate) {
  scheduler_.SetWanted({Job(7)});
  for (int64_t done = 0; done <= 100; ++done) {  // all within a second
    preparer_.last().progress(PreparationProgress{"upload", "image.tar", done, 100});
  }
  std::vector<int64_t> lines;
  for (const PreparationProgress& p : reported_) lines.push_back(p.bytes_done);
  EXPECT_EQ(lines, (std::vector<int64_t>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}));
  EXPECT_EQ(scheduler_.Find(7)->progress->bytes_done, 100);
}

TEST_F(SchedulerTest, DestroyingTheSchedulerCancelsTheAttemptAndNothingCallsBack) {
  auto s = std::make_unique<PreparationScheduler>(
      &clock_, &clock_, &preparer_,
      [this](const PreparationJob& j, const PreparationOutcome& o, const PreparationProgress& p) {
        finished_.push_back({j, o, p});
      });
  s->SetWanted({Job(7)});
  s.reset();
  EXPECT_TRUE(preparer_.last().cancelled);
  preparer_.Succeed();
  clock_.Advance(absl::Hours(1));
  EXPECT_TRUE(finished_.empty());
}

}  // namespace
}  // namespace sn::agent

// The sandbox fence (privhelper/rpc/sandbox_fence.h) on a SimulatedClock and a real directory:
// one mutation per sandbox, the hold of a mutation whose end privhelper did not see, the records
// a restarted privhelper reads, and their bounds.
#include "privhelper/rpc/sandbox_fence.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/fs/posix_fs.h"
#include "gtest/gtest.h"

namespace sn::privhelper {
namespace {

constexpr char kBoot[] = "0123456789abcdef0123456789abcdef";
constexpr char kOtherBoot[] = "fedcba9876543210fedcba9876543210";
constexpr char kA[] = "11111111-2222-4333-8444-555555555555";
constexpr char kB[] = "66666666-7777-4888-9999-aaaaaaaaaaaa";

class SandboxFenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sn-fence-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    absl::StatusOr<fs::Dir> d = fs::PosixFs::Get()->OpenPath(root_);
    ASSERT_TRUE(d.ok()) << d.status();
    state_ = *std::move(d);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::unique_ptr<SandboxFence> Open(const std::string& boot = kBoot, int64_t max = 1024) {
    absl::StatusOr<std::unique_ptr<SandboxFence>> f =
        SandboxFence::Open(fs::PosixFs::Get(), state_, boot, &clock_, max);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? *std::move(f) : nullptr;
  }
  std::vector<std::string> Records() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(root_ + "/fence")) {
      out.push_back(e.path().filename());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static bool Admitted(const std::variant<SandboxFence::Entry, SandboxFence::Refused>& v) {
    return std::holds_alternative<SandboxFence::Entry>(v);
  }
  static SandboxFence::Refused RefusedAs(
      const std::variant<SandboxFence::Entry, SandboxFence::Refused>& v) {
    return std::get<SandboxFence::Refused>(v);
  }
  // A mutation's budget and grace end `s` seconds from now.
  MonoTime In(int s) const { return clock_.Monotonic() + absl::Seconds(s); }
  // Touches a record by name, as an earlier privhelper would have left it.
  void Plant(const std::string& name) const {
    std::filesystem::create_directories(root_ + "/fence");
    chmod((root_ + "/fence").c_str(), 0700);
    FILE* f = fopen((root_ + "/fence/" + name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
  }

  SimulatedClock clock_;
  std::string root_;
  fs::Dir state_;
};

TEST_F(SandboxFenceTest, OneCreatePerSandboxAtATimeAndReleasedWhenAnswered) {
  std::unique_ptr<SandboxFence> f = Open();
  ASSERT_NE(f, nullptr);
  {
    auto a = f->Enter(kA, 1, In(10));
    ASSERT_TRUE(Admitted(a));
    EXPECT_EQ(RefusedAs(f->Enter(kA, 1, In(10))), SandboxFence::Refused::kBusy);
    EXPECT_TRUE(f->Fenced(kA));
    EXPECT_FALSE(f->Fenced(kB));
    EXPECT_TRUE(Admitted(f->Enter(kB, 1, In(10))));  // another sandbox runs (and is released)
    EXPECT_TRUE(f->HoldsGeneration(1));
    EXPECT_FALSE(f->HoldsGeneration(2));
    ASSERT_EQ(Records().size(), 1u) << "one record per create in flight";
    EXPECT_EQ(Records()[0].rfind(kA, 0), 0u);
  }
  // Its helper answered with the exchange's end seen: released at once, record gone.
  EXPECT_FALSE(f->Fenced(kA));
  EXPECT_TRUE(Records().empty());
  EXPECT_TRUE(Admitted(f->Enter(kA, 1, In(10))));
}

TEST_F(SandboxFenceTest, ACreatePrivhelperDidNotSeeEndHoldsItsSandboxUntilItCannotAct) {
  std::unique_ptr<SandboxFence> f = Open();
  ASSERT_NE(f, nullptr);
  {
    auto a = f->Enter(kA, 3, In(10));
    ASSERT_TRUE(Admitted(a));
    std::get<SandboxFence::Entry>(a).HoldUntil(In(5));
  }
  clock_.Advance(absl::Seconds(4));
  EXPECT_TRUE(f->Fenced(kA));
  EXPECT_TRUE(f->HoldsGeneration(3)) << "collection waits for it";
  EXPECT_EQ(RefusedAs(f->Enter(kA, 3, In(10))), SandboxFence::Refused::kBusy);
  clock_.Advance(absl::Seconds(1));
  EXPECT_FALSE(f->Fenced(kA));
  EXPECT_FALSE(f->HoldsGeneration(3));
  EXPECT_TRUE(Records().empty());
}

// An answer that shows the sandbox exists: the held create landed, its fence ends at once. A
// create still in flight keeps its own fence (its answer decides).
TEST_F(SandboxFenceTest, SeeingTheSandboxEndsAHeldFenceButNotACreateInFlight) {
  std::unique_ptr<SandboxFence> f = Open();
  ASSERT_NE(f, nullptr);
  auto a = f->Enter(kA, 1, In(10));
  ASSERT_TRUE(Admitted(a));
  f->SawSandbox(kA);
  EXPECT_TRUE(f->Fenced(kA)) << "in flight: only its own answer ends it";
  std::get<SandboxFence::Entry>(a).HoldUntil(In(60));
  EXPECT_TRUE(f->Fenced(kA));
  f->SawSandbox(kA);
  EXPECT_FALSE(f->Fenced(kA));
  EXPECT_TRUE(Records().empty());
  EXPECT_TRUE(Admitted(f->Enter(kA, 1, In(10)))) << "a new create of the same sandbox runs";
}

TEST_F(SandboxFenceTest, AHoldNeverOutlastsTheRecordedEnd) {
  std::unique_ptr<SandboxFence> f = Open();
  ASSERT_NE(f, nullptr);
  {
    auto a = f->Enter(kA, 1, In(10));  // recorded end: 10 s + kNativeSettle
    ASSERT_TRUE(Admitted(a));
    std::get<SandboxFence::Entry>(a).HoldUntil(In(3600));
  }
  clock_.Advance(absl::Seconds(10) + SandboxFence::kNativeSettle - absl::Milliseconds(1));
  EXPECT_TRUE(f->Fenced(kA));
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_FALSE(f->Fenced(kA));
}

// The helper's request outlives privhelper (kill -9): the next privhelper reads the record and
// fences the sandbox until the recorded end, then removes the record.
TEST_F(SandboxFenceTest, ARestartedPrivhelperFencesWhatTheRecordsSayUntilTheirEnd) {
  std::unique_ptr<SandboxFence> before = Open();
  ASSERT_NE(before, nullptr);
  auto a = before->Enter(kA, 2, In(10));
  ASSERT_TRUE(Admitted(a));
  ASSERT_EQ(Records().size(), 1u);
  // The process dies here: its Entry never ends. A new privhelper opens the same directory.
  std::unique_ptr<SandboxFence> after = Open();
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->size(), 1);
  EXPECT_TRUE(after->Fenced(kA));
  EXPECT_TRUE(after->HoldsGeneration(2));
  EXPECT_EQ(RefusedAs(after->Enter(kA, 2, In(10))), SandboxFence::Refused::kBusy);
  clock_.Advance(absl::Seconds(10) + SandboxFence::kNativeSettle);
  EXPECT_FALSE(after->Fenced(kA));
  EXPECT_TRUE(Records().empty());
  EXPECT_TRUE(Admitted(after->Enter(kA, 2, In(10))));
  std::get<SandboxFence::Entry>(a).HoldUntil(In(0));  // the dead process's object, inert here
}

TEST_F(SandboxFenceTest, ARecordedFenceEndsWhenTheSandboxIsSeen) {
  std::unique_ptr<SandboxFence> before = Open();
  ASSERT_NE(before, nullptr);
  auto a = before->Enter(kA, 2, In(10));
  ASSERT_TRUE(Admitted(a));
  std::unique_ptr<SandboxFence> after = Open();
  ASSERT_NE(after, nullptr);
  ASSERT_TRUE(after->Fenced(kA));
  after->SawSandbox(kA);
  EXPECT_FALSE(after->Fenced(kA));
  EXPECT_TRUE(Records().empty());
  std::get<SandboxFence::Entry>(a).HoldUntil(In(0));
}

TEST_F(SandboxFenceTest, RecordsOfAnEarlierBootOrPastTheirEndAreDroppedAtOpen) {
  clock_.Advance(absl::Seconds(100));
  const int64_t future = absl::ToInt64Nanoseconds(In(60));
  const int64_t past = absl::ToInt64Nanoseconds(In(-1));
  Plant(SandboxFence::RecordName({kA, 1, kOtherBoot, future}));
  Plant(SandboxFence::RecordName({kB, 1, kBoot, past}));
  std::unique_ptr<SandboxFence> f = Open();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->size(), 0);
  EXPECT_FALSE(f->Fenced(kA)) << "a machine crash ended its request with the daemon";
  EXPECT_FALSE(f->Fenced(kB));
  EXPECT_TRUE(Records().empty());
}

TEST_F(SandboxFenceTest, TwoRecordsOfOneSandboxKeepTheLaterEnd) {
  const int64_t soon = absl::ToInt64Nanoseconds(In(5));
  const int64_t later = absl::ToInt64Nanoseconds(In(50));
  Plant(SandboxFence::RecordName({kA, 1, kBoot, later}));
  Plant(SandboxFence::RecordName({kA, 1, kBoot, soon}));
  std::unique_ptr<SandboxFence> f = Open();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(Records(), std::vector<std::string>{SandboxFence::RecordName({kA, 1, kBoot, later})});
  clock_.Advance(absl::Seconds(49));
  EXPECT_TRUE(f->Fenced(kA));
  clock_.Advance(absl::Seconds(1));
  EXPECT_FALSE(f->Fenced(kA));
}

TEST_F(SandboxFenceTest, ANameThatIsNotARecordRefusesTheStartNamingIt) {
  Plant("not-a-record");
  absl::StatusOr<std::unique_ptr<SandboxFence>> f =
      SandboxFence::Open(fs::PosixFs::Get(), state_, kBoot, &clock_);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(f.status().message().find("fence/not-a-record"), std::string::npos) << f.status();
}

TEST_F(SandboxFenceTest, TheDirectoryMustBePrivhelpersAlone) {
  std::filesystem::create_directories(root_ + "/fence");
  chmod((root_ + "/fence").c_str(), 0755);
  absl::StatusOr<std::unique_ptr<SandboxFence>> f =
      SandboxFence::Open(fs::PosixFs::Get(), state_, kBoot, &clock_);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(SandboxFence::Open(fs::PosixFs::Get(), state_, "not-a-boot-id", &clock_).ok());
}

TEST_F(SandboxFenceTest, BoundedAndRefusedWhenNoRecordCanBeWritten) {
  std::unique_ptr<SandboxFence> f = Open(kBoot, /*max=*/1);
  ASSERT_NE(f, nullptr);
  auto a = f->Enter(kA, 1, In(10));
  ASSERT_TRUE(Admitted(a));
  EXPECT_EQ(RefusedAs(f->Enter(kB, 1, In(10))), SandboxFence::Refused::kFull);
  std::get<SandboxFence::Entry>(a).HoldUntil(In(0));
  // The directory gone (a full or broken disk): nothing is admitted without its record.
  std::filesystem::remove_all(root_ + "/fence");
  EXPECT_EQ(RefusedAs(f->Enter(kB, 1, In(10))), SandboxFence::Refused::kRecordFailed);
  EXPECT_FALSE(f->Fenced(kB));
}

TEST_F(SandboxFenceTest, RecordNamesRoundTripAndRefuseEverythingElse) {
  const SandboxFence::Record r{kA, 42, kBoot, 123456789};
  std::optional<SandboxFence::Record> back =
      SandboxFence::ParseRecordName(SandboxFence::RecordName(r));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->sandbox_id, kA);
  EXPECT_EQ(back->generation, 42);
  EXPECT_EQ(back->boot_id, kBoot);
  EXPECT_EQ(back->end_ns, 123456789);
  for (const char* bad : {"", "x", "11111111-2222-4333-8444-555555555555.1.0123.5",
                          "11111111-2222-4333-8444-555555555555.0.0123456789abcdef0123456789abcdef.5",
                          "11111111-2222-4333-8444-555555555555.1.0123456789abcdef0123456789abcdef.05",
                          "11111111-2222-4333-8444-555555555555.1.0123456789ABCDEF0123456789abcdef.5",
                          "../etc.1.0123456789abcdef0123456789abcdef.5",
                          "11111111-2222-4333-8444-555555555555.1.0123456789abcdef0123456789abcdef.5.6"}) {
    EXPECT_FALSE(SandboxFence::ParseRecordName(bad).has_value()) << bad;
  }
}

TEST_F(SandboxFenceTest, TheBootIdIsTheKernels) {
  absl::StatusOr<std::string> id = SandboxFence::ReadBootId();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->size(), 32u);
}

}  // namespace
}  // namespace sn::privhelper

// privhelper's table of capacity slots held by calls in flight (docs/protocol.md 22a), on a
// SimulatedClock: admission up to the bound, the other calls' sandboxes handed to each call,
// release with the call, and the hold of a call whose caller went away.
#include "privhelper/rpc/slot_reservations.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gtest/gtest.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;

std::string Id(int i) {
  char b[37];
  snprintf(b, sizeof b, "00000000-0000-4000-8000-%012d", i);
  return b;
}

TEST(SlotReservationsTest, OperationsHoldTheSlotTheirStateChangeTakes) {
  pb::ExecuteRequest create;
  create.mutable_create()->set_sandbox_id(Id(1));
  ASSERT_TRUE(SlotOf(create).has_value());
  EXPECT_EQ(SlotOf(create)->kind, SlotKind::kActive);
  EXPECT_EQ(SlotOf(create)->sandbox_id, Id(1));
  pb::ExecuteRequest resume;
  resume.mutable_resume()->set_sandbox_id(Id(2));
  ASSERT_TRUE(SlotOf(resume).has_value());
  EXPECT_EQ(SlotOf(resume)->kind, SlotKind::kActive);
  resume.mutable_resume()->set_reconciliation_only(true);
  EXPECT_FALSE(SlotOf(resume).has_value()) << "a reconciliation-only resume starts nothing";
  pb::ExecuteRequest kill_compute;
  kill_compute.mutable_kill_compute()->set_sandbox_id(Id(3));
  ASSERT_TRUE(SlotOf(kill_compute).has_value());
  EXPECT_EQ(SlotOf(kill_compute)->kind, SlotKind::kRetained);
  pb::ExecuteRequest kill, del, inspect;
  kill.mutable_kill()->set_sandbox_id(Id(4));
  del.mutable_delete_retained()->set_sandbox_id(Id(4));
  inspect.mutable_inspect()->set_sandbox_id(Id(4));
  EXPECT_FALSE(SlotOf(kill).has_value());
  EXPECT_FALSE(SlotOf(del).has_value());
  EXPECT_FALSE(SlotOf(inspect).has_value());
}

TEST(SlotReservationsTest, AdmitsUpToTheBoundAndHandsEachCallTheOthersInFlight) {
  SimulatedClock clock;
  SlotReservations t(/*max_active=*/3, /*max_retained=*/1, &clock);
  std::optional<SlotReservations::Reservation> a = t.TryReserve(SlotKind::kActive, Id(1));
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->others().empty());
  std::optional<SlotReservations::Reservation> b = t.TryReserve(SlotKind::kActive, Id(2));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->others(), std::vector<std::string>{Id(1)});
  std::optional<SlotReservations::Reservation> c = t.TryReserve(SlotKind::kActive, Id(3));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->others(), (std::vector<std::string>{Id(1), Id(2)}));
  EXPECT_FALSE(t.TryReserve(SlotKind::kActive, Id(4)).has_value()) << "a fourth beyond 3";
  EXPECT_EQ(t.in_flight(SlotKind::kActive), 3);
  // The other kind has its own bound.
  std::optional<SlotReservations::Reservation> r = t.TryReserve(SlotKind::kRetained, Id(5));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->others().empty()) << "active reservations are not the retained kind's";
  EXPECT_FALSE(t.TryReserve(SlotKind::kRetained, Id(6)).has_value());
}

TEST(SlotReservationsTest, ASlotIsFreedWhenItsCallEndsWhateverThePath) {
  SimulatedClock clock;
  SlotReservations t(1, 1, &clock);
  {
    std::optional<SlotReservations::Reservation> a = t.TryReserve(SlotKind::kActive, Id(1));
    ASSERT_TRUE(a.has_value());
    EXPECT_FALSE(t.TryReserve(SlotKind::kActive, Id(2)).has_value());
    // Moved (as an optional is moved into a handler's scope): still one reservation.
    SlotReservations::Reservation moved = *std::move(a);
    a.reset();
    EXPECT_EQ(t.in_flight(SlotKind::kActive), 1);
  }
  EXPECT_EQ(t.in_flight(SlotKind::kActive), 0);
  EXPECT_TRUE(t.TryReserve(SlotKind::kActive, Id(2)).has_value());
}

TEST(SlotReservationsTest, OthersAreDistinctAndNeverTheCallsOwnSandbox) {
  SimulatedClock clock;
  SlotReservations t(4, 1, &clock);
  auto a = t.TryReserve(SlotKind::kActive, Id(1));
  auto b = t.TryReserve(SlotKind::kActive, Id(1));  // a confused caller: the same sandbox twice
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_TRUE(b->others().empty());
  auto c = t.TryReserve(SlotKind::kActive, Id(2));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->others(), std::vector<std::string>{Id(1)});
  auto d = t.TryReserve(SlotKind::kActive, Id(3));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->others(), (std::vector<std::string>{Id(1), Id(2)}));
  EXPECT_FALSE(t.TryReserve(SlotKind::kActive, Id(4)).has_value());
}

TEST(SlotReservationsTest, ABoundOfZeroStillAdmitsOneCallForItsHelperToAnswer) {
  SimulatedClock clock;
  SlotReservations t(5, 0, &clock);
  auto a = t.TryReserve(SlotKind::kRetained, Id(1));
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->others().empty());
  EXPECT_FALSE(t.TryReserve(SlotKind::kRetained, Id(2)).has_value());
}

TEST(SlotReservationsTest, ACallWhoseCallerLeftHoldsItsSlotUntilItsEnd) {
  SimulatedClock clock;
  SlotReservations t(1, 1, &clock);
  {
    auto a = t.TryReserve(SlotKind::kActive, Id(1));
    ASSERT_TRUE(a.has_value());
    a->HoldUntil(clock.Monotonic() + absl::Seconds(63));
  }
  EXPECT_EQ(t.in_flight(SlotKind::kActive), 1);
  clock.Advance(absl::Seconds(62));
  auto refused = t.TryReserve(SlotKind::kActive, Id(2));
  EXPECT_FALSE(refused.has_value()) << "the helper may still act for the abandoned call";
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(t.in_flight(SlotKind::kActive), 0);
  auto b = t.TryReserve(SlotKind::kActive, Id(2));
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->others().empty());
}

TEST(SlotReservationsTest, HeldCallsAreHandedToLaterCallsAsInFlight) {
  SimulatedClock clock;
  SlotReservations t(2, 1, &clock);
  {
    auto a = t.TryReserve(SlotKind::kActive, Id(1));
    ASSERT_TRUE(a.has_value());
    a->HoldUntil(clock.Monotonic() + absl::Seconds(10));
  }
  auto b = t.TryReserve(SlotKind::kActive, Id(2));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->others(), std::vector<std::string>{Id(1)});
}

// Many threads at once never hold more slots of a kind than the bound.
TEST(SlotReservationsTest, ConcurrentReservationsNeverExceedTheBound) {
  SlotReservations t(3, 1);
  std::atomic<int> held{0}, peak{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < 2000; ++n) {
        auto r = t.TryReserve(SlotKind::kActive, Id(i * 10000 + n));
        if (!r.has_value()) continue;
        EXPECT_LE(r->others().size(), 2u);
        const int now = ++held;
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        --held;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_LE(peak.load(), 3);
  EXPECT_EQ(t.in_flight(SlotKind::kActive), 0);
}

}  // namespace
}  // namespace sn::privhelper

#include "privhelper/rpc/slot_reservations.h"

#include <algorithm>
#include <set>

#include "proto/operation_of.h"

namespace sn::privhelper {

namespace pb = ::sn::privhelper::v1;

std::optional<SlotClaim> SlotOf(const pb::ExecuteRequest& r) {
  switch (SlotOfRequest(r)) {  // the slot column of common/operations.def
    case Slot::kNone: return std::nullopt;
    case Slot::kActive: return SlotClaim{SlotKind::kActive, SandboxIdOf(r)};
    case Slot::kRetained: return SlotClaim{SlotKind::kRetained, SandboxIdOf(r)};
  }
  return std::nullopt;
}

SlotReservations::Reservation::~Reservation() {
  if (table_ != nullptr) table_->Release(token_);
}

void SlotReservations::Reservation::HoldUntil(MonoTime until) {
  if (table_ == nullptr) return;
  table_->Hold(token_, until);
  table_ = nullptr;  // the table ends it now, at `until`
}

SlotReservations::SlotReservations(int64_t max_active, int64_t max_retained, const Clock* clock)
    : max_active_(max_active),
      max_retained_(max_retained),
      clock_(clock != nullptr ? clock : SystemClock::Get()) {}

int64_t SlotReservations::Admits(SlotKind kind) const {
  // A bound of 0 still admits one call at a time: its helper refuses it from the count (its
  // own sandbox alone exceeds 0) or answers the idempotent case (already in that state).
  return std::max<int64_t>(1, kind == SlotKind::kActive ? max_active_ : max_retained_);
}

void SlotReservations::PurgeLocked() {
  const MonoTime now = clock_->Monotonic();
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.held_until.has_value() && *it->second.held_until <= now) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<SlotReservations::Reservation> SlotReservations::TryReserve(
    SlotKind kind, const std::string& sandbox_id) {
  absl::MutexLock lock(&mu_);
  PurgeLocked();
  int64_t n = 0;
  std::set<std::string> others;
  for (const auto& [token, e] : entries_) {
    if (e.kind != kind) continue;
    ++n;
    if (e.sandbox_id != sandbox_id) others.insert(e.sandbox_id);
  }
  if (n >= Admits(kind)) return std::nullopt;
  const uint64_t token = next_token_++;
  entries_.emplace(token, Entry{kind, sandbox_id, std::nullopt});
  return Reservation(this, token, std::vector<std::string>(others.begin(), others.end()));
}

int64_t SlotReservations::in_flight(SlotKind kind) const {
  absl::MutexLock lock(&mu_);
  const MonoTime now = clock_->Monotonic();
  int64_t n = 0;
  for (const auto& [token, e] : entries_) {
    if (e.kind == kind && (!e.held_until.has_value() || *e.held_until > now)) ++n;
  }
  return n;
}

void SlotReservations::Release(uint64_t token) {
  absl::MutexLock lock(&mu_);
  entries_.erase(token);
}

void SlotReservations::Hold(uint64_t token, MonoTime until) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(token);
  if (it != entries_.end()) it->second.held_until = until;
}

}  // namespace sn::privhelper

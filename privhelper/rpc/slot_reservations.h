// The capacity slots held by Execute calls in flight (spec §5 `capacity`, docs/protocol.md 22a):
// create and a resume that is not reconciliation-only hold an active slot (max_active),
// kill_compute a retained slot (max_retained), from before privhelper writes the call to its
// native helper until the helper's answer (or failure) is back. One table per privhelper,
// whatever the generation or provider of the call: the limits are the installation's.
//
// The table is not the count. The count is the helper's complete, label-filtered inventory,
// which survives restarts; a reservation only tells the helper which other calls of its kind
// are still between their count and their mutation. A call is admitted only while fewer than
// its bound of its kind are in flight (at least one, so that a bound of 0 is still answered
// by the helper from its inventory), and receives the sandbox ids of the others (distinct,
// never its own). The helper then counts the containers in that state, plus those ids and its
// own sandbox where none of theirs is there yet, and refuses `capacity` beyond the bound. For
// any two calls of a kind, the later admitted one sees the earlier either among the ids (still
// in flight) or in its inventory (finished: the helper lists after privhelper admitted), so
// however many calls run at once, the sandboxes in that state never exceed the bound. The
// price is a spurious `capacity` at the boundary while calls are in flight (one that fails,
// or an idempotent create or resume): `capacity` means nothing was attempted, retry later.
//
// A call whose native exchange privhelper did not see end may still act after the call: its
// caller went away (the helper runs on until its budget's end and final-outcome grace), the
// helper was signalled at the budget's end or died with the call, or it answered `uncertain`.
// Its slot is then held (HoldUntil) for as long as its sandbox is fenced (sandbox_fence.h:
// what the helper sent may still be carried out by the daemon for kNativeSettle), not released
// with the call: a create or resume landing after its slot went would make one sandbox more in
// that state than any helper counted (a slow daemon and a short budget, which the agent can
// always arrange: fence_audit_test `ACreateThatMayStillLandKeepsItsCapacitySlot`).
//
// Thread-safe; one mutex, held only for the table's bookkeeping (never across I/O), so calls
// of a kind still run concurrently.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_SLOT_RESERVATIONS_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_SLOT_RESERVATIONS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "proto/privhelper.pb.h"

namespace sn::privhelper {

enum class SlotKind {
  kActive,    // create; resume that is not reconciliation-only (max_active)
  kRetained,  // kill_compute (max_retained)
};

// The slot a request holds while it runs, and for which sandbox; nullopt for operations that
// hold none (kill and delete_retained free slots: a freed slot the count has not seen yet only
// refuses more; reads and a reconciliation-only resume change no state).
struct SlotClaim {
  SlotKind kind;
  std::string sandbox_id;
};
std::optional<SlotClaim> SlotOf(const v1::ExecuteRequest& r);

class SlotReservations {
 public:
  // One reservation, released when destroyed unless HoldUntil moved its end. Movable.
  class Reservation {
   public:
    Reservation(Reservation&& o) noexcept
        : table_(o.table_), token_(o.token_), others_(std::move(o.others_)) {
      o.table_ = nullptr;
    }
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    Reservation& operator=(Reservation&&) = delete;
    ~Reservation();

    // The sandbox ids of the other reservations of this kind in flight when this one was
    // admitted: distinct, never this call's own sandbox, fewer than the bound.
    const std::vector<std::string>& others() const { return others_; }

    // The helper may still act for this call until `until` (monotonic): the slot stays held
    // until then instead of being released when this object goes.
    void HoldUntil(MonoTime until);

   private:
    friend class SlotReservations;
    Reservation(SlotReservations* t, uint64_t token, std::vector<std::string> others)
        : table_(t), token_(token), others_(std::move(others)) {}
    SlotReservations* table_;
    uint64_t token_;
    std::vector<std::string> others_;
  };

  // REQUIRES: bounds >= 0; `clock` (nullptr: SystemClock) outlives this.
  SlotReservations(int64_t max_active, int64_t max_retained, const Clock* clock = nullptr);

  // A slot of `kind` for `sandbox_id`, or nullopt (answer `capacity`, nothing attempted) when
  // as many reservations of the kind as its bound (at least one) are in flight.
  std::optional<Reservation> TryReserve(SlotKind kind, const std::string& sandbox_id)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Reservations of `kind` in flight now (held ones included until their end).
  int64_t in_flight(SlotKind kind) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    SlotKind kind;
    std::string sandbox_id;
    std::optional<MonoTime> held_until;  // set once the caller went away
  };
  void Release(uint64_t token) ABSL_LOCKS_EXCLUDED(mu_);
  void Hold(uint64_t token, MonoTime until) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops held reservations whose end passed.
  void PurgeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t Admits(SlotKind kind) const;

  const int64_t max_active_;
  const int64_t max_retained_;
  const Clock* const clock_;
  mutable absl::Mutex mu_;
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_SLOT_RESERVATIONS_H_

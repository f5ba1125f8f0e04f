#include "privhelper/native/microvm/channel_pool.h"

#include <utility>

namespace sn::microvm {

GuestChannelPool::Lease::Lease(GuestChannelPool* pool, std::string id,
                               std::unique_ptr<GuestChannel> c, bool reused)
    : pool_(pool), id_(std::move(id)), channel_(std::move(c)), reused_(reused) {}

GuestChannelPool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      id_(std::move(other.id_)),
      channel_(std::move(other.channel_)),
      reused_(other.reused_) {}

GuestChannelPool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->Release(id_, std::move(channel_));
}

absl::StatusOr<GuestChannelPool::Lease> GuestChannelPool::Acquire(const std::string& id,
                                                                  absl::Time deadline,
                                                                  const ConnectFn& connect) {
  std::unique_ptr<GuestChannel> kept;
  {
    absl::MutexLock lock(&mu_);
    auto it = slots_.try_emplace(id).first;
    Slot& slot = it->second;  // std::map: stays valid while the slot is referred to (waiters)
    ++slot.waiters;
    const bool free = mu_.AwaitWithDeadline(
        absl::Condition(+[](Slot* s) { return !s->busy; }, &slot), deadline);
    --slot.waiters;
    if (!free) {
      Tidy(it);
      return absl::DeadlineExceededError("another exchange of the VM holds its guest channel");
    }
    slot.busy = true;
    slot.forget = false;
    if (slot.idle != nullptr) {
      kept = std::move(slot.idle);
      --kept_;
    }
  }
  if (kept != nullptr && kept->Quiet()) return Lease(this, id, std::move(kept), true);
  kept.reset();  // hung up, or the guest wrote between calls: closed
  absl::StatusOr<std::unique_ptr<GuestChannel>> fresh = connect(deadline);
  if (!fresh.ok()) {
    Release(id, nullptr);
    return fresh.status();
  }
  return Lease(this, id, *std::move(fresh), false);
}

void GuestChannelPool::Release(const std::string& id, std::unique_ptr<GuestChannel> channel) {
  std::unique_ptr<GuestChannel> closing;  // closed outside the lock
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return;  // not reached: a leased slot is never erased
  Slot& slot = it->second;
  slot.busy = false;
  if (channel != nullptr && channel->open() && !slot.forget && kept_ < kMaxKept) {
    slot.idle = std::move(channel);
    ++kept_;
  } else {
    closing = std::move(channel);
  }
  slot.forget = false;
  Tidy(it);
}

void GuestChannelPool::Forget(const std::string& id) {
  std::unique_ptr<GuestChannel> closing;
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return;
  Slot& slot = it->second;
  if (slot.busy) slot.forget = true;
  if (slot.idle != nullptr) {
    closing = std::move(slot.idle);
    --kept_;
  }
  Tidy(it);
}

void GuestChannelPool::Tidy(std::map<std::string, Slot>::iterator it) {
  const Slot& s = it->second;
  if (!s.busy && s.waiters == 0 && s.idle == nullptr) slots_.erase(it);
}

size_t GuestChannelPool::kept() const {
  absl::MutexLock lock(&mu_);
  return kept_;
}

}  // namespace sn::microvm

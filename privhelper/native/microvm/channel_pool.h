// The native helper's guest channels, one kept per VM and reused across its exchanges (exec,
// write_file, read_file): every exchange after the first saves a connection and a Hello round
// trip to the guest (docs/performance.md, "The microVM provider").
//
// qemu's chardev serves one client at a time, so a VM's channel is used by one exchange at a
// time: another exchange of the same VM waits for it — as it would wait in qemu's listen
// backlog for a connection of its own — until its deadline. A kept channel is used again only
// when it is still open and nothing arrived on it since its last answer (GuestChannel::Quiet):
// a guest that writes between calls, or a VM that exited or was booted again (its socket hung
// up), gets a new connection, and the kept one is closed. Stopping a VM (kill_compute, kill, a
// failed start) forgets its channel first, so that the power-off's own connection is not kept
// waiting behind an idle one. At most kMaxKept channels are kept; beyond that an exchange's
// channel is closed after it, as before there was a pool.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_CHANNEL_POOL_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_CHANNEL_POOL_H_

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "privhelper/native/microvm/guest_channel.h"

namespace sn::microvm {

class GuestChannelPool {
 public:
  static constexpr size_t kMaxKept = 256;
  using ConnectFn = std::function<absl::StatusOr<std::unique_ptr<GuestChannel>>(absl::Time)>;

  // A VM's channel for one exchange; given back to the pool when destroyed.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    GuestChannel& operator*() const { return *channel_; }
    GuestChannel* operator->() const { return channel_.get(); }
    // True when the channel was kept from an earlier exchange (tests).
    bool reused() const { return reused_; }

   private:
    friend class GuestChannelPool;
    Lease(GuestChannelPool* pool, std::string id, std::unique_ptr<GuestChannel> c, bool reused);
    GuestChannelPool* pool_;
    std::string id_;
    std::unique_ptr<GuestChannel> channel_;
    bool reused_;
  };

  GuestChannelPool() = default;
  GuestChannelPool(const GuestChannelPool&) = delete;
  GuestChannelPool& operator=(const GuestChannelPool&) = delete;

  // The channel of VM `id`: its kept one when quiet, else one from `connect` (its error is
  // returned as it is). Waits while another exchange of the VM holds it: DeadlineExceeded at
  // `deadline`.
  absl::StatusOr<Lease> Acquire(const std::string& id, absl::Time deadline,
                                const ConnectFn& connect);

  // Closes VM `id`'s kept channel; one in use is closed when given back.
  void Forget(const std::string& id);

  // Channels kept now (tests).
  size_t kept() const;

 private:
  struct Slot {
    bool busy = false;
    bool forget = false;  // Forget while busy: close it when given back
    int waiters = 0;
    std::unique_ptr<GuestChannel> idle;
  };
  void Release(const std::string& id, std::unique_ptr<GuestChannel> channel);
  // Erases `id`'s slot when nothing refers to it any more.
  void Tidy(std::map<std::string, Slot>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Slot> slots_ ABSL_GUARDED_BY(mu_);
  size_t kept_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sn::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_CHANNEL_POOL_H_

// Admission control of privhelper's gRPC server (a hostile agent must not exhaust privhelper's threads or memory): bounds on what
// one caller can make privhelper hold at once. The honest agent runs at most 64 operations
// node-wide (spec §4) plus one probe at a time; the bounds leave room for that and refuse the
// rest with a typed answer (REFUSAL_ADMISSION -> `unavailable`) instead of growing.
//
// Thread-safe.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_ADMISSION_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_ADMISSION_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/wire/limits.h"
#include "proto/execute_stream.h"

namespace sn::privhelper {

// Execute calls running at once: the agent's node-wide bound of operations in flight (spec
// §4, 64); the 65th concurrent call is refused. The native helper runs as many at once.
inline constexpr int kMaxConcurrentExecute = static_cast<int>(wire::kMinNodeWideOperations);
// Control calls (Probe, RegisterGeneration) running at once; the agent makes one at a time.
inline constexpr int kMaxConcurrentControl = 8;
// Request bytes (payloads included) of the Execute calls admitted at once:
// kMaxInflightRequestBytes (proto/execute_stream.h, shared with the agent, which queues a
// payload until it fits: docs/protocol.md 23a).
// (Message sizes: proto/execute_stream.h. A payload arrives in chunks only after its call
// was admitted, so gRPC buffers at most about one request message per stream.)
// HTTP/2 streams one connection may have open, and gRPC's own thread and memory quota.
// (Streams beyond the admission bounds still reach a handler, which refuses them typed.)
inline constexpr int kMaxStreamsPerConnection = kMaxConcurrentExecute + kMaxConcurrentControl + 8;
inline constexpr int kMaxServerThreads = kMaxConcurrentExecute + kMaxConcurrentControl + 32;
inline constexpr size_t kServerMemoryQuota = size_t{256} << 20;
// gRPC's sync server: one completion queue, polled by one thread at a time (the thread that
// reads a call runs it, and gRPC's thread manager starts or wakes another to poll meanwhile, so
// calls still run concurrently). With the poll engine every thread polling at once needs a
// wakeup eventfd, which gRPC creates the first time that many poll together and keeps for the
// server's life. With gRPC's default of two pollers the second one's was made lazily, and when
// that happened while privhelper was out of descriptors the poller failed in a loop
// ("pollset_work: Too many open files", thousands of lines a second) and served nothing until
// descriptors were free again; one poller's eventfd is made when the server starts, and no
// descriptor is ever made lazily on the serving path.
inline constexpr int kServerCompletionQueues = 1;
inline constexpr int kMaxServerPollers = 1;
// The HTTP/2 receive window of each stream (no BDP probe): four artifact messages.
inline constexpr int kStreamWindowBytes = 1 << 20;

class Admission {
 public:
  Admission(int max_calls, size_t max_bytes) : max_calls_(max_calls), max_bytes_(max_bytes) {}

  // A held admission; releases on destruction.
  class Ticket {
   public:
    Ticket(Admission* a, size_t bytes) : a_(a), bytes_(bytes) {}
    Ticket(Ticket&& o) noexcept : a_(o.a_), bytes_(o.bytes_) { o.a_ = nullptr; }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket() {
      if (a_ != nullptr) a_->Release(bytes_);
    }

   private:
    Admission* a_;
    size_t bytes_;
  };

  // Admits a call of `bytes` request bytes, or nullopt when a bound would be exceeded.
  std::optional<Ticket> TryAdmit(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (calls_ >= max_calls_ || bytes > max_bytes_ - bytes_) return std::nullopt;
    ++calls_;
    bytes_ += bytes;
    return Ticket(this, bytes);
  }

  int calls() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  void Release(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    --calls_;
    bytes_ -= bytes;
  }

  const int max_calls_;
  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_ADMISSION_H_

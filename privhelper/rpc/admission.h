// Admission control of privhelper's gRPC server (finding 4 of the first audit): bounds on what
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

namespace sn::privhelper {

// Execute calls running at once: the agent's node-wide 64 plus headroom for its control
// traffic; the 73rd concurrent call is refused.
inline constexpr int kMaxConcurrentExecute =
    static_cast<int>(wire::kMinNodeWideOperations) + 8;
// Request bytes of the Execute calls admitted at once (about five maximal write_file calls).
inline constexpr size_t kMaxInflightRequestBytes = size_t{256} << 20;
// The largest message either way: the largest §5 payload (48 MiB of write_file content or
// read_file content) plus room for the other members and framing.
inline constexpr size_t kMaxMessageBytes = wire::kMaxFileContentBytes + (size_t{1} << 20);
static_assert(static_cast<size_t>(wire::kMaxReadFileBytes) <= wire::kMaxFileContentBytes);
static_assert(wire::kMaxStdinBytes <= wire::kMaxFileContentBytes);
// HTTP/2 streams one connection may have open, and gRPC's own thread and memory quota.
inline constexpr int kMaxStreamsPerConnection = kMaxConcurrentExecute + 8;
inline constexpr int kMaxServerThreads = kMaxConcurrentExecute + 32;
inline constexpr size_t kServerMemoryQuota = size_t{512} << 20;

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

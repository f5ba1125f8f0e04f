// What every seccomp filter privhelper builds with libseccomp shares: the context's owner, its
// export as the classic BPF program seccomp(2) takes, and the loading of such a program.
// Exported programs are built where allocating is safe (before a fork: privhelper for a
// native helper's spawn filter, the VM supervisor for qemu's policy) and loaded after it,
// where only async-signal-safe calls may run.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_SECCOMP_BPF_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_SECCOMP_BPF_H_

#include <linux/filter.h>

#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace sn::native {

// Owns a scmp_filter_ctx (seccomp_release on destruction).
struct SeccompCtxDeleter {
  void operator()(void* ctx) const;
};
using SeccompCtx = std::unique_ptr<void, SeccompCtxDeleter>;

// The filter `ctx` describes, as a BPF program (never empty on success).
absl::StatusOr<std::vector<sock_filter>> ExportFilterProgram(void* ctx);

// Loads `program` into the calling thread with the raw seccomp(2) call. Async-signal-safe (no
// allocation): a child calls it after fork. REQUIRES: no_new_privs, or CAP_SYS_ADMIN.
// Returns 0 or an errno value.
int LoadFilterProgram(std::span<const sock_filter> program) noexcept;

}  // namespace sn::native

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_SECCOMP_BPF_H_

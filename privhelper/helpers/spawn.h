// Starting a native helper with least privilege (docs/security.md, "Native helpers").
//
// SpawnSandboxed forks; the child then makes only async-signal-safe system calls (everything
// it needs is prepared by the parent before the fork) and, in this order:
//   1. unblocks every signal and resets every disposition to the default, starts a new session;
//   2. places the helper's socketpair end at fd 3 and the optional extra descriptor (the
//      generation lease) at fd 4, stdin and stdout on /dev/null, keeps stderr (logs) and closes
//      every other descriptor (close_range);
//   3. sets the resource limits of SandboxLimits;
//   4. sets no_new_privs; locks the securebits NOROOT, NO_SETUID_FIXUP, KEEP_CAPS (off) and
//      NO_CAP_AMBIENT_RAISE; empties the bounding set, clears the ambient set and sets the
//      permitted, effective and inheritable sets to zero (capset);
//   5. loads the seccomp BPF program the parent exported (seccomp_policy.h, kSpawn);
//   6. execve()s the helper with the given argv and an empty environment.
// The helper stays uid 0 (the Docker socket is root:docker 0660) but holds no capability and
// can never gain one. A failing step is reported to the parent through a close-on-exec pipe
// and the child exits 127; SpawnSandboxed then reaps it and returns the step and errno.
//
// REQUIRES: the caller holds CAP_SETPCAP (securebits, bounding set) — privhelper runs as root.
// Thread-safe; blocks until the child has exec'd or failed (microseconds).
#ifndef SANDBOX_NODE_PRIVHELPER_HELPERS_SPAWN_H_
#define SANDBOX_NODE_PRIVHELPER_HELPERS_SPAWN_H_

#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "privhelper/helpers/sanitizer_build.h"

namespace sn::privhelper {

// The resource limits of a helper (soft = hard; the helper cannot raise them: no
// CAP_SYS_RESOURCE). Sizes are explained in docs/security.md.
struct SandboxLimits {
  // RLIMIT_NOFILE: 64 concurrent calls each hold a daemon connection and an event loop
  // (epoll, eventfd, timerfd), plus 4 kept connections and 0-4: ~260; four times that.
  uint64_t open_files = 1024;
  // RLIMIT_CORE: no core files (a core would hold request bytes: env, stdin, file content).
  uint64_t core_bytes = 0;
  // RLIMIT_AS, a backstop against a runaway, not the memory budget (resident memory is
  // bounded by the per-call limits and privhelper's admission): 64 calls x 112 MiB of virtual
  // memory at most (48 MiB stdin + two 32 MiB output reservations) + 4 malloc arenas + 64
  // thread stacks + libraries = ~7.5 GiB. Beyond it malloc fails and the helper aborts (its
  // calls become uncertain; privhelper starts a new helper on the next call).
  // Unlimited in sanitizer builds (tests only): ASan reserves terabytes of shadow memory.
  uint64_t address_space_bytes = kSanitizerBuild ? RLIM_INFINITY : uint64_t{8} << 30;
  // RLIMIT_STACK: 2 MiB, which glibc also takes as every thread's stack size.
  uint64_t stack_bytes = uint64_t{2} << 20;
  uint64_t locked_bytes = 0;         // RLIMIT_MEMLOCK: nothing to lock
  uint64_t message_queue_bytes = 0;  // RLIMIT_MSGQUEUE: no POSIX message queues
};

struct SpawnSpec {
  std::string path;               // the executable (absolute)
  std::vector<std::string> argv;  // argv[0] included
  int channel_fd = -1;            // becomes fd 3 (REQUIRED)
  int extra_fd = -1;              // becomes fd 4 when >= 0
  SandboxLimits limits;
  std::span<const sock_filter> filter;  // loaded just before execve (REQUIRED, non-empty)
};

// Starts the child; returns its pid (the caller must reap it). The parent's descriptors are
// untouched (the caller closes its copy of the child's socket end).
absl::StatusOr<pid_t> SpawnSandboxed(const SpawnSpec& spec);

// Checks the text of /proc/<pid>/status of a started helper: NoNewPrivs 1, Seccomp 2 (filter
// mode) with at least `min_filters` filters where the kernel reports the count, CapInh, CapPrm,
// CapEff, CapBnd and CapAmb all zero. FailedPrecondition naming the first field that differs.
absl::Status CheckSandboxedStatus(std::string_view proc_status, int min_filters);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_HELPERS_SPAWN_H_

// Who holds a flock on a file, read from /proc/locks without taking any lock (the operator's
// view never probes a lease by locking it). Bounded: at most kMaxProcLocksBytes are read.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_PROC_LOCKS_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_PROC_LOCKS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

namespace sn::privhelper {

inline constexpr size_t kMaxProcLocksBytes = size_t{4} << 20;

// (st_dev, st_ino) -> pids holding a granted FLOCK on that file (waiters are not holders).
using LockHolders = std::map<std::pair<uint64_t, uint64_t>, std::vector<pid_t>>;

// Parses the text of /proc/locks; lines it does not understand are skipped.
LockHolders ParseProcLocks(std::string_view text);
// Reads /proc/locks (empty when unreadable).
LockHolders ReadProcLocks();

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_PROC_LOCKS_H_

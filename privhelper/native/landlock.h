// Confining a native helper's file access with Landlock (the kernel's unprivileged access
// control): after RestrictToReading(dirs), this thread and every thread it starts later can open
// only files and directories beneath `dirs`, and only to read them; nothing anywhere can be
// written, created, removed, renamed, linked or executed. A provider whose operations open
// files (the microVM provider reads its store's records and /proc) calls it from
// PrepareForSandbox, before the runtime starts its serving threads: the helper is uid 0
// without capabilities, which still owns every root-owned file, so neither the permission bits
// nor the seccomp filter (which cannot see paths) would keep it from reading, say, /etc/shadow.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_LANDLOCK_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_LANDLOCK_H_

#include <span>
#include <string>

#include "absl/status/status.h"

namespace sn::native {

// FailedPrecondition when the kernel has no Landlock (the helper then refuses to start: the
// provider needs it); an error naming the directory when one cannot be opened.
// REQUIRES: no_new_privs is set (the spawn path sets it).
absl::Status RestrictToReading(std::span<const std::string> dirs);

}  // namespace sn::native

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_LANDLOCK_H_

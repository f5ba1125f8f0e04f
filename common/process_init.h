// Process-wide set-up that every production binary (agent, privhelper, native_helper, devcore)
// runs first in main().
#ifndef SANDBOX_NODE_COMMON_PROCESS_INIT_H_
#define SANDBOX_NODE_COMMON_PROCESS_INIT_H_

#include <cstddef>
#include <string_view>

namespace sn {

// Structured logging under `component`, and absl::Mutex deadlock detection off. Debian builds
// Abseil without NDEBUG, which leaves the detector on in every binary: a lock-order graph
// update on every Mutex acquisition (gRPC's own locks included), measured at ~1% of the
// agent's CPU per request. Tests do not call this and keep the detector.
void InitProcess(std::string_view component);

// Unmaps the pages of the read-only segments (code, constants, unwind tables) of the executable
// and its shared libraries: madvise(MADV_DONTNEED) of each of them. Start-up touches most of a statically linked
// binary's text, and the kernel's fault-around maps the cached pages around every touched one,
// so an idle process would keep ~10 MiB of code mapped that it no longer runs; after this it
// maps again only what it runs (a minor fault from the page cache on the first use of a path).
// Called once start-up is over (docs/performance.md, "Idle memory"). Returns the bytes advised.
size_t ReleaseStartupPages();

// When agent and privhelper call ReleaseStartupPages: long enough after start for the agent
// to have connected to Core and to privhelper (whose gRPC accept path is then paged in).
inline constexpr int kReleaseStartupPagesAfterSeconds = 30;

// The malloc policy of the two processes that stream a generation's artifacts (agent and
// privhelper). glibc's defaults map and unmap large buffers (gRPC's read slices of up to
// 4 MiB, the 256 KiB messages) and hand freed heap tops back with madvise as soon as they
// exceed twice the largest freed mapping, so the pieces of a stream were written into fresh
// pages: profiled, page faults inside recvmsg and madvise TLB shoot-downs were a fifth of
// privhelper's samples while the bytes streamed (docs/performance.md, "The benchmark's own
// observer, and freed memory kept while the bytes stream"). This keeps buffers below
// kMmapThresholdBytes on the heap and freed memory up to kTrimThresholdBytes per arena;
// ReturnFreedMemory hands it all back once a stream ends.
inline constexpr int kMmapThresholdBytes = 8 << 20;
inline constexpr int kTrimThresholdBytes = 32 << 20;
void KeepFreedMemoryWhileStreaming();
// malloc_trim(0): every arena's free memory back to the kernel (idle memory stays what it was
// before the stream). Called when an artifact's stream ended, whichever way.
void ReturnFreedMemory();

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_PROCESS_INIT_H_

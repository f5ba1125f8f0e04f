#include "common/process_init.h"

#include <link.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "common/log.h"

namespace sn {

void InitProcess(std::string_view component) {
  InitLogging(component);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

void KeepFreedMemoryWhileStreaming() {
  mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
  mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes);
}

void ReturnFreedMemory() { malloc_trim(0); }

namespace {

// For each loaded object with a file: the executable (empty name) and the shared libraries
// (absolute paths; not the kernel's vDSO).
int ReleaseObject(dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name == nullptr || (info->dlpi_name[0] != '\0' && info->dlpi_name[0] != '/')) {
    return 0;
  }
  auto* advised = static_cast<size_t*>(data);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) != 0) continue;
    // Whole pages inside the segment only: a page it shares with a writable neighbour stays.
    const uintptr_t begin = (info->dlpi_addr + ph.p_vaddr + page - 1) & ~(page - 1);
    const uintptr_t end = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz) & ~(page - 1);
    if (end <= begin) continue;
    // MADV_DONTNEED, not MADV_PAGEOUT: the kernel pages out file pages only for their owner
    // (the agent does not own its executable). These segments are never written, so dropping
    // the mappings loses nothing: the pages stay in the page cache, and one used again is
    // mapped back by a minor fault.
    if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) == 0) {
      *advised += end - begin;
    }
  }
  return 0;
}

}  // namespace

size_t ReleaseStartupPages() {
  size_t advised = 0;
  dl_iterate_phdr(ReleaseObject, &advised);
  return advised;
}

}  // namespace sn

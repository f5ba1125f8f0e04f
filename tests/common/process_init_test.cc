#include "common/process_init.h"

#include <gtest/gtest.h>

#include "absl/base/config.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace sn {
namespace {

// A field of /proc/self/smaps_rollup, in KiB.
int64_t RollupKib(const std::string& field) {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon != std::string::npos && line.substr(0, colon) == field) {
      return std::stoll(line.substr(colon + 1));
    }
  }
  return -1;
}

// Resident KiB of this process's file-backed pages (Rss minus anonymous and shared memory).
int64_t FileBackedRssKib() {
  return RollupKib("Rss") - RollupKib("Anonymous") - RollupKib("Shmem");
}

int Fibonacci(int n) { return n < 2 ? n : Fibonacci(n - 1) + Fibonacci(n - 2); }

TEST(ReleaseStartupPagesTest, UnmapsResidentCodeWhichStillRunsAfterwards) {
  const int64_t before = FileBackedRssKib();
  ASSERT_GT(before, 0);
  EXPECT_GT(ReleaseStartupPages(), 0u);
  const int64_t after = FileBackedRssKib();
  EXPECT_LT(after, before);
  // The unmapped code is mapped back on use: calls through it still work.
  EXPECT_EQ(Fibonacci(20), 6765);
}

TEST(FreedMemoryTest, KeptWhileStreamingAndReturnedAfterwards) {
#ifdef ABSL_HAVE_ADDRESS_SANITIZER  // gcc and clang alike
  GTEST_SKIP() << "ASan's allocator does not follow mallopt";
#endif
  KeepFreedMemoryWhileStreaming();
  ReturnFreedMemory();
  const int64_t base = RollupKib("Anonymous");
  ASSERT_GE(base, 0);
  // 16 MiB in the stream's message size, written, then freed.
  constexpr size_t kPiece = 256 << 10;
  constexpr int kPieces = 64;
  std::vector<char*> pieces;
  for (int i = 0; i < kPieces; ++i) {
    char* p = static_cast<char*>(malloc(kPiece));
    ASSERT_NE(p, nullptr);
    memset(p, i + 1, kPiece);
    pieces.push_back(p);
  }
  volatile char sum = 0;
  for (char* p : pieces) sum = sum + p[kPiece - 1];
  ASSERT_GE(RollupKib("Anonymous") - base, 15 * 1024);
  for (char* p : pieces) free(p);
  // Kept: the next pieces of a stream reuse these pages instead of faulting in fresh ones
  // (glibc's defaults would have unmapped every one of them at its free).
  EXPECT_GE(RollupKib("Anonymous") - base, 15 * 1024);
  // Returned once the stream is over.
  ReturnFreedMemory();
  EXPECT_LE(RollupKib("Anonymous") - base, 1024);
}

}  // namespace
}  // namespace sn

#include "common/process_init.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace sn {
namespace {

// Resident KiB of this process's file-backed pages (Rss minus anonymous and shared memory).
int64_t FileBackedRssKib() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string key;
  int64_t value = 0;
  int64_t rss = 0;
  int64_t anon = 0;
  int64_t shmem = 0;
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    key = line.substr(0, colon);
    value = std::stoll(line.substr(colon + 1));
    if (key == "Rss") rss = value;
    if (key == "Anonymous") anon = value;
    if (key == "Shmem") shmem = value;
  }
  return rss - anon - shmem;
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

}  // namespace
}  // namespace sn

// Runs a fuzz target over every file of its corpus directory so CI exercises it without
// libFuzzer (the target aborts on a broken invariant). The BUILD rule names the directory
// (SN_FUZZ_CORPUS, relative to tests/fuzz) and the least number of inputs it must hold
// (SN_FUZZ_MIN_INPUTS), so a lost corpus fails instead of passing vacuously.
#include <dirent.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define SN_STRINGIFY_(x) #x
#define SN_STRINGIFY(x) SN_STRINGIFY_(x)

namespace {

TEST(FuzzCorpusTest, EveryCorpusInputKeepsTheFuzzInvariants) {
  const std::string dir = "tests/fuzz/" SN_STRINGIFY(SN_FUZZ_CORPUS);
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') files.push_back(dir + "/" + e->d_name);
  }
  closedir(d);
  ASSERT_GE(files.size(), static_cast<size_t>(SN_FUZZ_MIN_INPUTS)) << dir;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    std::ifstream in(f, std::ios::binary);
    ASSERT_TRUE(in.good());
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    EXPECT_EQ(LLVMFuzzerTestOneInput(data, bytes.size()), 0);
  }
}

}  // namespace

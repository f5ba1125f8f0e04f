// The tar the Engine's archive API needs (privhelper/native/docker/tar.h): one file written
// whole or framed around its content, and the first entry read back within a bound.
#include "privhelper/native/docker/tar.h"

#include <string>

#include "gtest/gtest.h"

namespace sn::native::docker {
namespace {

TEST(TarTest, OneFileArchiveReadsBack) {
  std::string tar = TarOneFile("hello.txt", 0640, "hello world");
  EXPECT_EQ(tar.size() % 512, 0u);
  TarFirstEntryReader r(1 << 20);
  // Fed in odd-sized pieces.
  for (size_t i = 0; i < tar.size(); i += 7) {
    if (!r.Feed(std::string_view(tar).substr(i, 7))) break;
  }
  ASSERT_TRUE(r.error().ok()) << r.error();
  EXPECT_TRUE(r.header_seen());
  EXPECT_EQ(r.type(), '0');
  EXPECT_EQ(r.size(), 11u);
  EXPECT_EQ(r.content(), "hello world");
  EXPECT_TRUE(r.complete());
}

TEST(TarTest, ReaderKeepsOnlyMaxBytesAndStopsEarly) {
  std::string tar = TarOneFile("big", 0600, std::string(5000, 'x'));
  TarFirstEntryReader r(10);
  EXPECT_FALSE(r.Feed(tar));
  EXPECT_EQ(r.content(), std::string(10, 'x'));
  EXPECT_EQ(r.size(), 5000u);
}

TEST(TarTest, LongNameUsesAPaxRecordAndReadsBack) {
  std::string name(150, 'n');
  std::string tar = TarOneFile(name, 0600, "abc");
  TarFirstEntryReader r(100);
  r.Feed(tar);
  EXPECT_TRUE(r.error().ok());
  EXPECT_EQ(r.content(), "abc");
  // The PAX record "<len> path=<name>\n" states its own length exactly.
  size_t rec = 512;
  std::string len = tar.substr(rec, tar.find(' ', rec) - rec);
  std::string expected_tail = " path=" + name + "\n";
  EXPECT_EQ(std::stoul(len), len.size() + expected_tail.size());
}

TEST(TarTest, FramingAroundTheContentIsTheWholeArchive) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{511}, size_t{512}, size_t{513}}) {
    const std::string content(size, 'c');
    for (const std::string& name : {std::string("f.txt"), std::string(150, 'n')}) {
      TarFraming f = TarOneFileFraming(name, 0640, size);
      EXPECT_EQ(f.head + content + f.tail, TarOneFile(name, 0640, content)) << size;
      EXPECT_EQ((f.head.size() + size + f.tail.size()) % 512, 0u);
    }
  }
}

TEST(TarTest, GarbageIsAnError) {
  TarFirstEntryReader r(10);
  r.Feed(std::string(512, 'z'));
  EXPECT_FALSE(r.error().ok());
}

}  // namespace
}  // namespace sn::native::docker

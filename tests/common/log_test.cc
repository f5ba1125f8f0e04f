#include "common/log.h"

#include "gtest/gtest.h"

namespace sn {
namespace {

TEST(Log, FormatsKeyValueLinesQuotingOnlyWhenNeeded) {
  EXPECT_EQ(FormatLogLine(LogLevel::kInfo, "agent", "connected", {{"epoch", int64_t{3}}}),
            "level=info component=agent msg=connected epoch=3\n");
  EXPECT_EQ(FormatLogLine(LogLevel::kError, "agent", "dial failed",
                          {{"error", "a \"b\"\nc"}}),
            "level=error component=agent msg=\"dial failed\" error=\"a \\\"b\\\"\\nc\"\n");
}

TEST(Log, ControlBytesAreEscapedSoOneEventIsOneLine) {
  std::string line = FormatLogLine(LogLevel::kWarning, "x", std::string("a\x01z"), {});
  EXPECT_EQ(line, "level=warning component=x msg=\"a\\x01z\"\n");
}

}  // namespace
}  // namespace sn

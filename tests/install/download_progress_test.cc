// tools/install/download_progress.h: the installer's lines about a download, on a driven clock.
#include "tools/install/download_progress.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"

namespace sn::install {
namespace {

constexpr uint64_t kPiece = 256 * 1024;  // the network child's largest data frame

wire::RuntimeArtifact Artifact(const std::string& name, int64_t size) {
  return wire::RuntimeArtifact{name, "agent", std::string(64, 'a'), size};
}

// Every line for `a` downloaded in pieces of kPiece, `every` apart.
std::vector<std::string> Download(DownloadProgress& progress, SimulatedClock& clock,
                                  const wire::RuntimeArtifact& a, absl::Duration every) {
  std::vector<std::string> lines;
  const uint64_t size = static_cast<uint64_t>(a.size);
  for (uint64_t done = 0; done < size;) {
    done = std::min(size, done + kPiece);
    clock.Advance(every);
    if (std::optional<std::string> line = progress.Line(a, done)) lines.push_back(*line);
  }
  return lines;
}

TEST(DownloadProgressTest, AFastDownloadSaysItsFirstBytesEachTenthAndItsEnd) {
  SimulatedClock clock;
  DownloadProgress progress(&clock);
  const wire::RuntimeArtifact a = Artifact("agent", 40 * kPiece);  // 10 MiB
  std::vector<std::string> lines = Download(progress, clock, a, absl::Milliseconds(1));
  ASSERT_EQ(lines.size(), 11u);
  EXPECT_EQ(lines.front(), "agent: downloaded 262144 of 10485760 bytes (2 %)");
  EXPECT_EQ(lines[1], "agent: downloaded 1310720 of 10485760 bytes (12 %)");
  EXPECT_EQ(lines.back(), "agent: downloaded 10485760 of 10485760 bytes (100 %)");
}

TEST(DownloadProgressTest, ASlowDownloadSaysWhereItIsEveryFiveSeconds) {
  SimulatedClock clock;
  DownloadProgress progress(&clock);
  const wire::RuntimeArtifact a = Artifact("privhelper", 100 * kPiece);
  // A piece per second: a tenth takes 10 s, so a line comes every 5 s (5 pieces).
  std::vector<std::string> lines = Download(progress, clock, a, absl::Seconds(1));
  ASSERT_EQ(lines.size(), 21u);
  EXPECT_EQ(lines[1], "privhelper: downloaded 1572864 of 26214400 bytes (6 %)");
  EXPECT_EQ(lines.back(), "privhelper: downloaded 26214400 of 26214400 bytes (100 %)");
}

TEST(DownloadProgressTest, EachArtifactStartsItsOwnLines) {
  SimulatedClock clock;
  DownloadProgress progress(&clock);
  const wire::RuntimeArtifact agent = Artifact("agent", 4 * kPiece);
  const wire::RuntimeArtifact helper = Artifact("native_helper", 4 * kPiece);
  EXPECT_EQ(Download(progress, clock, agent, absl::Milliseconds(1)).size(), 4u);
  std::vector<std::string> lines = Download(progress, clock, helper, absl::Milliseconds(1));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), "native_helper: downloaded 262144 of 1048576 bytes (25 %)");
}

TEST(DownloadProgressTest, AnArtifactOfOnePieceHasOneLine) {
  SimulatedClock clock;
  DownloadProgress progress(&clock);
  const wire::RuntimeArtifact a = Artifact("preparer", 1000);
  EXPECT_EQ(Download(progress, clock, a, absl::Milliseconds(1)),
            std::vector<std::string>{"preparer: downloaded 1000 of 1000 bytes (100 %)"});
}

}  // namespace
}  // namespace sn::install

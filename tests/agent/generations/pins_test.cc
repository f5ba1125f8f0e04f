// The durable deployment pins (pins.h): exact format, round trip, torn or foreign files.
#include "agent/generations/pins.h"

#include <stdlib.h>

#include <string>

#include "common/atomic_file.h"
#include "gtest/gtest.h"

namespace sn::agent {
namespace {

const std::string kA(64, 'a');

TEST(PinsTest, FormatIsExactAndRoundTrips) {
  DeploymentPins p;
  EXPECT_EQ(FormatPins(p), "{\"schema\":1,\"serving\":null,\"target\":null}\n");
  p.target = GenerationRef{3, kA};
  p.serving = GenerationRef{2, kA};
  absl::StatusOr<DeploymentPins> back = ParsePins(FormatPins(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
}

TEST(PinsTest, TornOrForeignFilesAreDataLoss) {
  for (const char* bad : {"", "{", "[]", R"({"schema":1,"target":null})",
                          R"({"schema":2,"target":null,"serving":null})",
                          R"({"schema":1,"target":7,"serving":null})",
                          R"({"schema":1,"target":{"generation":0,"specification_digest":"aa"},"serving":null})",
                          R"({"schema":1,"target":null,"serving":{"generation":1}})",
                          R"({"schema":1,"target":null,"serving":null,"x":1})"}) {
    absl::StatusOr<DeploymentPins> p = ParsePins(bad);
    EXPECT_TRUE(absl::IsDataLoss(p.status())) << bad << " " << p.status();
  }
}

TEST(PinsTest, FileStoreIsDurableAndAMissingFileIsNoPins) {
  char tmpl[] = "/tmp/agent-pins-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  FilePinStore store(dir + "/deployment.json");
  absl::StatusOr<DeploymentPins> none = store.Load();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, DeploymentPins{});
  DeploymentPins p;
  p.serving = GenerationRef{9, kA};
  ASSERT_TRUE(store.Store(p).ok());
  EXPECT_EQ(*FilePinStore(dir + "/deployment.json").Load(), p);
  ASSERT_TRUE(WriteFileAtomically(dir + "/deployment.json", "{\"schema\":1}").ok());
  EXPECT_TRUE(absl::IsDataLoss(store.Load().status()));
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
}  // namespace sn::agent

// The overlapped image load (privhelper/store/overlapped_load.h) against the host's real
// dockerd, with privhelper's own pieces: the release store's Writer on the real filesystem,
// DockerImporter on the Beast engine. An archive made here (a new image ID and tag) whose every
// tar entry, the end-of-archive blocks included, lies before the withheld tail: an upload that
// ends before a verified Commit cuts the load mid-body, and the daemon then holds no image with
// that ID and no new tag; the same archive committed loads.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/importer.h"
#include "privhelper/store/overlapped_load.h"
#include "privhelper/store/state_dir.h"
#include "privhelper/store/release_store.h"
#include "tests/privhelper/docker/image_archive.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper::store {
namespace {

using ::sn::testing::CraftedImage;
using ::sn::testing::MakeImageArchive;
using ::sn::docker::DockerImporter;

constexpr char kDockerSocket[] = "/var/run/docker.sock";
constexpr uint64_t kW = OverlappedLoad::kWithheldBytes;

class OverlappedLoadDockerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<docker::HttpResponse> ping = engine_.Request("GET", "/_ping", "", {});
    if (!ping.ok() || ping->status != 200) {
      if (::sn::testing::InCi()) FAIL() << "dockerd not answering (CI=true)";
      GTEST_SKIP() << "SKIPPED LOUDLY: dockerd is not answering on " << kDockerSocket;
    }
    absl::StatusOr<Dir> state = OpenStateDir(fs_, dir_.File("state"), 0);
    ASSERT_TRUE(state.ok()) << state.status();
    state_ = *std::move(state);
    absl::StatusOr<std::unique_ptr<ReleaseStore>> store = ReleaseStore::Open(
        fs_, state_, dir_.File("state"), 0, *release::PublicKey::FromRaw(std::string(32, 1)));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    image_ = MakeImageArchive(3 << 20, kW);
  }
  void TearDown() override {
    if (!image_.image_id.empty()) {
      (void)engine_.Request("DELETE", absl::StrCat("/images/", image_.image_id, "?force=1"), "",
                            {});
    }
  }
  wire::RuntimeArtifact Artifact() const {
    return {"overlap.tar", "image", Sha256Hex(image_.archive),
            static_cast<int64_t>(image_.archive.size())};
  }
  // What the daemon answers for the image's ID and its tag (HTTP status).
  int InspectStatus(const std::string& name) {
    absl::StatusOr<docker::HttpResponse> r =
        engine_.Request("GET", absl::StrCat("/images/", name, "/json"), "", {});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->status : -1;
  }
  // Starts the load observing a Writer of the archive; appends `bytes`.
  std::unique_ptr<ReleaseStore::Writer> Upload(OverlappedLoad& load, std::string_view bytes) {
    absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> w = store_->Write("rel", Artifact());
    EXPECT_TRUE(w.ok()) << w.status();
    if (!w.ok()) return nullptr;
    EXPECT_TRUE(load.Attach(**w).ok());
    load.Start(importer_);
    for (size_t at = 0; at < bytes.size(); at += 256 << 10) {
      EXPECT_TRUE((*w)->Append(bytes.substr(at, 256 << 10)).ok());
    }
    return *std::move(w);
  }

  docker::BeastDockerEngine engine_{kDockerSocket};
  DockerImporter importer_{&engine_, absl::Minutes(2)};
  ::sn::testing::ShortTempDir dir_;
  PosixFs fs_;
  Dir state_;
  std::unique_ptr<ReleaseStore> store_;
  CraftedImage image_;
};

TEST_F(OverlappedLoadDockerTest, AnUploadEndedBeforeItsCommitLeavesTheDaemonNoImageAndNoTag) {
  ASSERT_GE(image_.archive.size() - image_.entries_end, kW + 1024)
      << "every entry and the end-of-archive blocks lie before the withheld tail";
  ASSERT_EQ(InspectStatus(image_.image_id), 404);
  OverlappedLoad load(7, "overlap.tar", image_.archive.size());
  std::unique_ptr<ReleaseStore::Writer> w = Upload(load, image_.archive);
  ASSERT_NE(w, nullptr);
  // Everything but the withheld tail reached the daemon's connection...
  EXPECT_EQ(load.AwaitWritten(image_.archive.size() - kW, absl::Minutes(1)),
            image_.archive.size() - kW);
  // ...then the upload ends without a Commit (a cancelled or broken stream).
  w.reset();
  absl::Status s = load.Wait();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(InspectStatus(image_.image_id), 404) << "no image with that ID";
  EXPECT_EQ(InspectStatus(image_.tag), 404) << "no new tag";
  EXPECT_FALSE(fs_.StatAt(state_, "releases").ok() &&
               store_->StoredSize("rel", "overlap.tar").ok())
      << "nothing published";
}

TEST_F(OverlappedLoadDockerTest, AnUploadWhoseLastChunkIsCorruptedLeavesTheDaemonNoImage) {
  ASSERT_EQ(InspectStatus(image_.image_id), 404);
  std::string bytes = image_.archive;
  bytes.back() ^= 1;  // the last chunk's last byte: only the digest can tell
  OverlappedLoad load(7, "overlap.tar", bytes.size());
  std::unique_ptr<ReleaseStore::Writer> w = Upload(load, bytes);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(load.AwaitWritten(bytes.size() - kW, absl::Minutes(1)), bytes.size() - kW);
  EXPECT_FALSE(w->Commit().ok()) << "the digest does not match";
  w.reset();
  EXPECT_FALSE(load.Wait().ok());
  EXPECT_EQ(InspectStatus(image_.image_id), 404);
  EXPECT_EQ(InspectStatus(image_.tag), 404);
  EXPECT_TRUE(absl::IsNotFound(store_->StoredSize("rel", "overlap.tar").status()));
}

// The control: the same kind of archive, committed, loads completely while it streams — so
// the cut, not the archive, is what the daemon refused above.
TEST_F(OverlappedLoadDockerTest, ACommittedUploadLoadsTheImageWithItsTag) {
  ASSERT_EQ(InspectStatus(image_.image_id), 404);
  OverlappedLoad load(7, "overlap.tar", image_.archive.size());
  std::unique_ptr<ReleaseStore::Writer> w = Upload(load, image_.archive);
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->Commit().ok());
  w.reset();
  EXPECT_TRUE(load.Wait().ok());
  EXPECT_EQ(InspectStatus(image_.image_id), 200);
  EXPECT_EQ(InspectStatus(image_.tag), 200);
  absl::StatusOr<std::unique_ptr<ReadableFile>> published =
      store_->OpenArtifact("rel", "overlap.tar");
  ASSERT_TRUE(published.ok());
  EXPECT_EQ((*published)->info().ino, load.file().ino) << "it read the published file";
}

}  // namespace
}  // namespace sn::privhelper::store

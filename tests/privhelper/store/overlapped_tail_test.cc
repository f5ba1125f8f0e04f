// When the overlapped image load (privhelper/store/overlapped_load.h) may send the archive's
// withheld tail, and when a load counts. No daemon: the release store's Writer on FaultFs, and
// an image store that records every byte the load hands it.
//   - The Writer tells its observer Verified only after the whole file passed size and
//     SHA-256, and before it makes the file durable; Committed only after the publication.
//   - The load sends the tail on Verified (not on Committed: the fsync is not on the daemon's
//     path), never before; a load whose verified file then fails to become durable does not
//     count.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/release/ed25519.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "privhelper/importer.h"
#include "privhelper/store/fs.h"
#include "privhelper/store/overlapped_load.h"
#include "privhelper/store/release_store.h"
#include "tests/fakes/fault_fs.h"

namespace sn::privhelper::store {

using fs::FaultFs;
namespace {

constexpr uint64_t kW = OverlappedLoad::kWithheldBytes;

// An image store that takes the whole body it is handed and records it.
class RecordingImporter final : public ImageImporter {
 public:
  absl::Status Load(const Source& source, uint64_t size) override {
    std::string buf(64 * 1024, '\0');
    uint64_t got = 0;
    absl::Status s;
    while (got < size) {
      absl::StatusOr<size_t> n = source(buf.data(), std::min<uint64_t>(buf.size(), size - got));
      if (!n.ok()) {
        s = n.status();
        break;
      }
      absl::MutexLock lock(&mu_);
      received_.append(buf.data(), *n);
      got += *n;
    }
    absl::MutexLock lock(&mu_);
    ended_ = true;
    return s;
  }
  absl::Duration LoadTimeout() const override { return absl::Minutes(2); }
  absl::StatusOr<std::string> ArchiveIdentity(const Source&, const Skip&, uint64_t) override {
    return absl::InvalidArgumentError("not derived here");
  }
  absl::StatusOr<std::string> Resolve(const std::string&) override {
    return absl::NotFoundError("none");
  }
  absl::Status ForgetImages(const std::vector<std::string>&) override {
    return absl::OkStatus();
  }
  // Waits (bounded) until `n` bytes were received or the load ended; returns the count.
  size_t AwaitReceived(size_t n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return ended_ || received_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Minutes(1));
    return received_.size();
  }
  std::string received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }

 private:
  absl::Mutex mu_;
  std::string received_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

// What a Writer tells its observer, in order.
class RecordingObserver final : public ReleaseStore::Writer::Observer {
 public:
  void Appended(uint64_t total) override { last_appended = total; }
  void Verified() override { events.push_back("verified"); }
  void Committed() override { events.push_back("committed"); }
  void Aborted() override { events.push_back("aborted"); }
  uint64_t last_appended = 0;
  std::vector<std::string> events;
};

class OverlappedTailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Dir> root = fs_.Root();
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = *std::move(root);
    absl::StatusOr<std::unique_ptr<ReleaseStore>> store = ReleaseStore::Open(
        fs_, root_, "/state", 0, *release::PublicKey::FromRaw(std::string(32, 1)));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    bytes_.resize(600 * 1024);
    for (size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = static_cast<char>(i * 131 + i / 7);
  }
  wire::RuntimeArtifact Artifact() const {
    return {"image.tar", "image", Sha256Hex(bytes_), static_cast<int64_t>(bytes_.size())};
  }
  std::unique_ptr<ReleaseStore::Writer> NewWriter() {
    absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> w = store_->Write("rel", Artifact());
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? *std::move(w) : nullptr;
  }
  static void AppendAll(ReleaseStore::Writer& w, std::string_view bytes) {
    for (size_t at = 0; at < bytes.size(); at += 256 << 10) {
      ASSERT_TRUE(w.Append(bytes.substr(at, 256 << 10)).ok());
    }
  }
  bool Published() { return store_->StoredSize("rel", "image.tar").ok(); }
  // A Writer observed by `load`, whose thread feeds `daemon`; `bytes` appended.
  std::unique_ptr<ReleaseStore::Writer> StartLoad(OverlappedLoad& load, RecordingImporter& daemon,
                                                  std::string_view bytes) {
    std::unique_ptr<ReleaseStore::Writer> w = NewWriter();
    if (w == nullptr) return nullptr;
    EXPECT_TRUE(load.Attach(*w).ok());
    load.Start(daemon);
    AppendAll(*w, bytes);
    return w;
  }
  // A Writer observed by a RecordingObserver; `bytes` appended.
  std::unique_ptr<ReleaseStore::Writer> Observed(RecordingObserver& seen, std::string_view bytes) {
    std::unique_ptr<ReleaseStore::Writer> w = NewWriter();
    if (w == nullptr) return nullptr;
    EXPECT_TRUE(w->Observe(&seen).ok());
    AppendAll(*w, bytes);
    return w;
  }

  FaultFs fs_;
  Dir root_;
  std::unique_ptr<ReleaseStore> store_;
  std::string bytes_;
};

TEST_F(OverlappedTailTest, TheWriterReportsVerifiedBeforeItsFsyncAndCommittedAfterThePublication) {
  RecordingObserver seen;
  std::unique_ptr<ReleaseStore::Writer> w = Observed(seen, bytes_);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(seen.last_appended, bytes_.size());
  ASSERT_TRUE(w->Commit().ok());
  w.reset();
  EXPECT_EQ(seen.events, (std::vector<std::string>{"verified", "committed"}));
  EXPECT_TRUE(Published());
}

TEST_F(OverlappedTailTest, AFileThatFailsItsDigestIsNeverReportedVerified) {
  RecordingObserver seen;
  std::string wrong = bytes_;
  wrong.back() ^= 1;
  std::unique_ptr<ReleaseStore::Writer> w = Observed(seen, wrong);
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(w->Commit().ok());
  w.reset();
  EXPECT_EQ(seen.events, (std::vector<std::string>{"aborted"}));
  EXPECT_FALSE(Published());
}

TEST_F(OverlappedTailTest, AVerifiedFileWhoseFsyncFailsIsReportedVerifiedThenAborted) {
  RecordingObserver seen;
  std::unique_ptr<ReleaseStore::Writer> w = Observed(seen, bytes_);
  ASSERT_NE(w, nullptr);
  fs_.FailSyncs(absl::InternalError("injected EIO"));
  EXPECT_FALSE(w->Commit().ok());
  w.reset();
  fs_.FailSyncs(absl::OkStatus());
  EXPECT_EQ(seen.events, (std::vector<std::string>{"verified", "aborted"}));
  EXPECT_FALSE(Published());
}

TEST_F(OverlappedTailTest, TheTailWaitsForTheVerificationAndALoadWithoutPublicationDoesNotCount) {
  RecordingImporter daemon;
  OverlappedLoad load(7, "image.tar", bytes_.size());
  std::unique_ptr<ReleaseStore::Writer> w = StartLoad(load, daemon, bytes_);
  ASSERT_NE(w, nullptr);
  // Every byte is in the temporary; all but the tail reached the image store.
  ASSERT_EQ(daemon.AwaitReceived(bytes_.size() - kW), bytes_.size() - kW);
  EXPECT_FALSE(load.done());
  // What the Writer's Commit reports once the whole file verified, before its fsync: the
  // tail follows, and the image store got exactly the verified file.
  load.Verified();
  ASSERT_EQ(daemon.AwaitReceived(bytes_.size()), bytes_.size());
  EXPECT_EQ(daemon.received(), bytes_);
  ASSERT_TRUE(load.AwaitDone(absl::Minutes(1)));
  // The fsync (or the publication) then failed: the Writer ends without publishing. The
  // load of verified bytes does not count, so Finish loads from the store again.
  load.Aborted();
  w.reset();
  absl::Status s = load.Wait();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_FALSE(Published());
}

TEST_F(OverlappedTailTest, ACommittedUploadCountsAsLoadedWithExactlyItsBytes) {
  RecordingImporter daemon;
  OverlappedLoad load(7, "image.tar", bytes_.size());
  std::unique_ptr<ReleaseStore::Writer> w = StartLoad(load, daemon, bytes_);
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->Commit().ok());
  w.reset();
  EXPECT_TRUE(load.Wait().ok());
  EXPECT_EQ(daemon.received(), bytes_);
  EXPECT_TRUE(Published());
}

TEST_F(OverlappedTailTest, ACorruptedLastChunkCutsTheLoadBeforeTheTail) {
  RecordingImporter daemon;
  OverlappedLoad load(7, "image.tar", bytes_.size());
  std::string wrong = bytes_;
  wrong.back() ^= 1;
  std::unique_ptr<ReleaseStore::Writer> w = StartLoad(load, daemon, wrong);
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(daemon.AwaitReceived(bytes_.size() - kW), bytes_.size() - kW);
  EXPECT_FALSE(w->Commit().ok());
  w.reset();
  EXPECT_FALSE(load.Wait().ok());
  EXPECT_EQ(daemon.received().size(), bytes_.size() - kW) << "the tail never left privhelper";
}

}  // namespace
}  // namespace sn::privhelper::store

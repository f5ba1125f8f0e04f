// The production Preparer (worker_preparer.h): the attempt runs off the event loop, its
// progress and outcome come back only through `post`, never inside Start, and Cancel()
// interrupts a download in progress.
#include "agent/generations/worker_preparer.h"

#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "agent/generations/privhelper_preparation.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/agent/fakes/fake_core.h"
#include "tests/agent/fakes/fake_privhelper.h"
#include "tests/agent/fakes/test_support.h"
#include "tests/release/fixture.h"

namespace sn::agent {
namespace {

using Loop = testing::PostedLoop;

class WorkerPreparerTest : public ::testing::Test {
 protected:
  WorkerPreparerTest()
      : key_(release::testing::NewKey()),
        public_key_(key_.public_key()),
        privhelper_(key_.public_key()),
        client_(privhelper_.socket) {
    release::testing::ArtifactBytes image{"image.tar", "image", std::string(3 << 20, 'q')};
    release::testing::SignedRelease r = release::testing::MakeRelease(key_, "rt-1", {image});
    core_.Set("/releases/rt-1/manifest.json", r.manifest_bytes);
    core_.Set("/releases/rt-1/manifest.json.sig", r.signature_file);
    core_.Set("/releases/rt-1/SHA256SUMS", r.sums);
    core_.Set("/releases/rt-1/image.tar", image.bytes);
    wire::SpecificationDocument d{4, "docker", "rt-1", {release::testing::Describe(image)},
                                  {{"busybox", "image.tar", {"sha256:" + std::string(64, '1')}}}};
    const std::string spec = wire::EncodeSpecificationDocument(d);
    digest_ = Sha256Hex(spec);
    core_.Set(ConfigurationTarget(4), spec);
    context_.core = &core_;
    context_.privhelper = &client_;
    context_.release_key = &public_key_;
    context_.provider = "docker";
  }

  release::PrivateKey key_;
  release::PublicKey public_key_;
  testing::FakePrivhelperServer privhelper_;
  GrpcPrivhelperPreparation client_;
  testing::FakeCore core_;
  std::string digest_;
  PreparationContext context_;
  Loop loop_;
};

TEST_F(WorkerPreparerTest, TheOutcomeAndProgressArriveThroughPostOnly) {
  WorkerPreparer preparer(context_, [this](std::function<void()> fn) { loop_.Post(fn); });
  std::optional<PreparationOutcome> outcome;
  std::vector<PreparationProgress> progress;
  std::unique_ptr<PreparationAttempt> attempt = preparer.Start(
      PreparationJob{{4, digest_}, JobRole::kTarget},
      [&](const PreparationProgress& p) { progress.push_back(p); },
      [&](PreparationOutcome o) { outcome = std::move(o); });
  EXPECT_FALSE(outcome.has_value());  // never inside Start
  ASSERT_TRUE(loop_.RunUntil([&] { return outcome.has_value(); }));
  EXPECT_FALSE(outcome->failure.has_value());
  EXPECT_EQ(outcome->images, std::set<std::string>{"busybox"});
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().phase, "import");
  EXPECT_EQ(progress.back().bytes_done, 3 << 20);
}

TEST_F(WorkerPreparerTest, CancelInterruptsTheDownloadInProgress) {
  absl::Notification halfway, go;
  core_.routes["/releases/rt-1/image.tar"].at_half = [&] {
    halfway.Notify();
    go.WaitForNotification();
  };
  WorkerPreparer preparer(context_, [this](std::function<void()> fn) { loop_.Post(fn); });
  std::optional<PreparationOutcome> outcome;
  std::unique_ptr<PreparationAttempt> attempt = preparer.Start(
      PreparationJob{{4, digest_}, JobRole::kTarget}, [](const PreparationProgress&) {},
      [&](PreparationOutcome o) { outcome = std::move(o); });
  halfway.WaitForNotification();
  attempt->Cancel();
  go.Notify();
  ASSERT_TRUE(loop_.RunUntil([&] { return outcome.has_value(); }));
  EXPECT_EQ(outcome->failure, Diagnostic::kPreparationCancelled);
  EXPECT_TRUE(privhelper_.service.WaitIdle());
  for (const std::string& c : privhelper_.service.calls()) EXPECT_NE(c, "FinishPreparation");
}

}  // namespace
}  // namespace sn::agent

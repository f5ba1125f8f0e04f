// The agent's rollout path assembled (no fakes of its own parts): deployment facts reach the
// generation manager, its scheduler starts the WorkerPreparer, which prepares the target from
// an in-memory Core's signed release into an in-process gRPC privhelper; the outcome comes
// back through the event loop, the generation serves at once and the serving pin moves to it.
// Time is simulated; the worker thread's results are pumped through a posted-closure queue.
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "agent/generations/manager.h"
#include "agent/generations/privhelper_preparation.h"
#include "agent/generations/worker_preparer.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/agent/fakes/fake_core.h"
#include "tests/agent/fakes/fake_privhelper.h"
#include "tests/agent/fakes/test_support.h"
#include "tests/release/fixture.h"

namespace sn::agent {
namespace {

using testing::MemoryPins;
using Loop = testing::PostedLoop;

wire::Request Create(int64_t generation, const std::string& image) {
  wire::Request r;
  r.generation = generation;
  r.operation = wire::Operation::kCreate;
  r.args = wire::CreateArgs{"s", image, std::nullopt, std::nullopt, 1, 1};
  return r;
}

TEST(RolloutTest, ATargetIsPreparedFromItsReleaseServesAtOnceAndTakesTheServingPin) {
  release::PrivateKey key = release::testing::NewKey();
  const release::PublicKey public_key = key.public_key();
  testing::FakePrivhelperServer privhelper(key.public_key());
  testing::FakeCore core;
  release::testing::ArtifactBytes image{"image2.tar", "image", std::string(1 << 20, 'z')};
  release::testing::SignedRelease r = release::testing::MakeRelease(key, "rt-2", {image});
  core.Set("/releases/rt-2/manifest.json", r.manifest_bytes);
  core.Set("/releases/rt-2/manifest.json.sig", r.signature_file);
  core.Set("/releases/rt-2/SHA256SUMS", r.sums);
  core.Set("/releases/rt-2/image2.tar", image.bytes);
  wire::SpecificationDocument d{2, "docker", "rt-2", {release::testing::Describe(image)},
                                {{"alpine", "image2.tar", {"sha256:" + std::string(64, '2')}}}};
  const std::string spec = wire::EncodeSpecificationDocument(d);
  const std::string digest = Sha256Hex(spec);
  core.Set(ConfigurationTarget(2), spec);

  GrpcPrivhelperPreparation client(privhelper.socket);
  PreparationContext context;
  context.core = &core;
  context.privhelper = &client;
  context.release_key = &public_key;
  context.provider = "docker";
  Loop loop;
  WorkerPreparer preparer(context, [&loop](std::function<void()> fn) { loop.Post(fn); });
  SimulatedClock clock;
  MemoryPins pins;
  std::vector<std::string> recorded;
  GenerationManager manager(
      GenerationManagerOptions{true, {1, std::string(64, '1')}}, &clock, &clock, &pins,
      &preparer, nullptr,
      [&](const PreparationJob&, const PreparationProgress& p,
          const std::optional<PreparationOutcome>& finished) {
        recorded.push_back(finished.has_value() ? "end" : p.phase);
      });
  ASSERT_TRUE(manager.Start().ok());
  manager.OnGenerationReports(
      {GenerationReport{1, std::string(64, '1'), HeldState::kReady, std::nullopt}});
  manager.OnDeployment(wire::Deployment{2, digest, 2});  // Core names 2 as target and serving

  // While 2 is prepared, 1 keeps serving and nothing runs on 2.
  EXPECT_EQ(manager.Admit(Create(2, "alpine")), GateAnswer::kUnconfirmed);
  EXPECT_FALSE(manager.pins().serving.has_value());
  std::vector<wire::Observation> obs = manager.NextObservations();
  EXPECT_EQ(obs[0].state, wire::GenerationState::kPreparing);

  ASSERT_TRUE(loop.RunUntil([&] { return !manager.scheduler().busy(); }));
  EXPECT_EQ(manager.Admit(Create(2, "alpine")), GateAnswer::kRun);
  EXPECT_EQ(manager.pins().serving, (std::optional<GenerationRef>(GenerationRef{2, digest})));
  EXPECT_EQ(pins.stored.serving, manager.pins().serving);
  obs = manager.NextObservations();
  ASSERT_EQ(obs.size(), 2u);
  EXPECT_EQ(obs[0].generation, 2);
  EXPECT_EQ(obs[0].state, wire::GenerationState::kReady);
  EXPECT_EQ(obs[1].generation, 1);
  EXPECT_TRUE(privhelper.service.stored().count("image2.tar"));
  ASSERT_FALSE(recorded.empty());
  EXPECT_EQ(recorded.front(), "specification");
  EXPECT_EQ(recorded.back(), "end");
}

}  // namespace
}  // namespace sn::agent

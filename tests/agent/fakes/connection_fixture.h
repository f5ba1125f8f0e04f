// A Connection wired to SimulatedClock and the fakes, plus helpers that speak as Core.
#ifndef SANDBOX_NODE_TESTS_AGENT_FAKES_CONNECTION_FIXTURE_H_
#define SANDBOX_NODE_TESTS_AGENT_FAKES_CONNECTION_FIXTURE_H_

#include <memory>
#include <optional>
#include <string>

#include "agent/connection/connection.h"
#include "common/clock.h"
#include "common/wire/codec.h"
#include "gtest/gtest.h"
#include "tests/agent/fakes/connection_seams.h"

namespace sn::agent::testing {

inline constexpr char kNodeId[] = "11111111-1111-4111-8111-111111111111";
inline constexpr char kInstallationId[] = "22222222-2222-4222-8222-222222222222";
inline constexpr char kConnectionId[] = "33333333-3333-4333-8333-333333333333";
inline constexpr char kOtherConnectionId[] = "44444444-4444-4444-8444-444444444444";
inline constexpr char kDigest[] =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

inline HealthReport ReadyReport() {
  HealthReport r;
  r.health.provider_ready = true;
  r.health.observed_at = "2026-11-29T12:00:00Z";
  r.health.host.cpu_cores = 2;
  r.health.host.load_1m = "0.25";
  r.health.host.memory_total_bytes = 1 << 30;
  r.health.host.memory_available_bytes = 1 << 29;
  r.backend_fingerprint = "docker/20.10.24 overlay2 cgroupfs";
  return r;
}

class ConnectionTest : public ::testing::Test {
 protected:
  explicit ConnectionTest(bool generation_management = false) {
    params_.node_id = kNodeId;
    params_.installation_id = kInstallationId;
    params_.provider = "docker";
    params_.deployment_generation = 7;
    params_.specification_digest = kDigest;
    params_.limits = ProviderLimits{16, 64};
    params_.generation_management = generation_management;
    health_.report = ReadyReport();
  }

  void Make(EpochStore* epochs = nullptr) {
    conn_ = std::make_unique<Connection>(
        params_, &transport_, &clock_, &clock_, &health_, epochs ? epochs : &epochs_,
        Backoff([this] { return random_; }), &sink_,
        [this](absl::Status st) { done_ = std::move(st); });
  }

  // Start, upgrade and answer the hello with a welcome of `epoch`.
  void GoLive(int64_t epoch = 5) {
    if (!conn_) Make();
    conn_->Start();
    transport_.Upgrade();
    ASSERT_EQ(conn_->state(), Connection::State::kAwaitingWelcome);
    transport_.Receive(WelcomeText(epoch));
    ASSERT_EQ(conn_->state(), Connection::State::kLive);
  }

  std::string WelcomeText(int64_t epoch, const char* connection_id = kConnectionId) {
    wire::Welcome w;
    w.connection_id = connection_id;
    w.owner_epoch = epoch;
    if (params_.generation_management) {
      w.deployment = wire::Deployment{7, kDigest, std::nullopt};
    }
    return wire::Encode(wire::Frame(w));
  }

  std::string AckText(int64_t epoch, const char* connection_id = kConnectionId) {
    wire::HeartbeatAck a;
    a.connection_id = connection_id;
    a.owner_epoch = epoch;
    if (params_.generation_management) {
      a.deployment = wire::Deployment{7, kDigest, std::nullopt};
    }
    return wire::Encode(wire::Frame(a));
  }

  // Decodes a frame the node sent, as Core would.
  wire::Frame SentFrame(size_t i) {
    EXPECT_LT(i, transport_.sent.size());
    absl::StatusOr<wire::Frame> f = wire::Decode(transport_.sent.at(i), wire::Role::kCore);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? *f : wire::Frame(wire::Hello{});
  }

  // The node closed with `code` and, once the handshake finished, went to backoff.
  void ExpectClosedWith(int code) {
    ASSERT_FALSE(transport_.close_codes.empty());
    EXPECT_EQ(transport_.close_codes.back(), code);
    EXPECT_EQ(conn_->state(), Connection::State::kClosing);
    transport_.Closed();
    EXPECT_EQ(conn_->state(), Connection::State::kBackoff);
  }

  ConnectionParams params_;
  SimulatedClock clock_;
  FakeTransport transport_;
  FakeHealth health_;
  FakeEpochStore epochs_;
  FakeRequestSink sink_;
  double random_ = 0.5;
  std::optional<absl::Status> done_;
  std::unique_ptr<Connection> conn_;
};

}  // namespace sn::agent::testing

#endif  // SANDBOX_NODE_TESTS_AGENT_FAKES_CONNECTION_FIXTURE_H_

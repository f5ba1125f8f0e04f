// Test doubles for the connection's seams (agent/connection/): an in-process Transport, a
// HealthSource, an EpochStore, a RequestSink and a GenerationControl. Each records what the
// code under test did.
#ifndef SANDBOX_NODE_TESTS_AGENT_FAKES_CONNECTION_SEAMS_H_
#define SANDBOX_NODE_TESTS_AGENT_FAKES_CONNECTION_SEAMS_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "agent/connection/connection.h"
#include "agent/connection/generation_control.h"
#include "agent/connection/health.h"
#include "agent/connection/transport.h"
#include "agent/state/state_files.h"

namespace sn::agent::testing {

class FakeTransport final : public Transport {
 public:
  void SetEvents(TransportEvents* events) override { events_ = events; }
  void Dial(size_t read_limit) override {
    ++dials;
    read_limit_ = read_limit;
    dialing = true;
  }
  void SetReadLimit(size_t bytes) override { read_limit_ = bytes; }
  void Send(std::string text) override { sent.push_back(std::move(text)); }
  void Close(int code) override { close_codes.push_back(code); }

  // Test drivers: each calls the state machine as the real transport would.
  void CompleteDial(DialResult r) {
    dialing = false;
    events_->OnDialResult(r);
  }
  void Upgrade() { CompleteDial({DialResult::Kind::kUpgraded, 101, ""}); }
  void Refuse(int http_status) {
    CompleteDial({DialResult::Kind::kHttpStatus, http_status, "refused"});
  }
  void Receive(std::string text, bool is_text = true) {
    events_->OnActivity();
    events_->OnMessage(std::move(text), is_text);
  }
  void Ping() { events_->OnActivity(); }
  void PeerClose(int code) { events_->OnClosed({true, code, "peer closed"}); }
  // The close handshake we started finished.
  void Closed() { events_->OnClosed({true, close_codes.empty() ? 0 : close_codes.back(), ""}); }

  size_t read_limit() const { return read_limit_; }
  int dials = 0;
  bool dialing = false;
  std::vector<std::string> sent;
  std::vector<int> close_codes;

 private:
  TransportEvents* events_ = nullptr;
  size_t read_limit_ = 0;
};

class FakeHealth final : public HealthSource {
 public:
  void Collect(std::function<void(HealthReport)> done) override {
    ++collects;
    if (manual) {
      pending.push_back(std::move(done));
      return;
    }
    done(report);
  }
  void CompleteAll() {
    auto p = std::move(pending);
    pending.clear();
    for (auto& f : p) f(report);
  }
  HealthReport report;
  bool manual = false;
  int collects = 0;
  std::vector<std::function<void(HealthReport)>> pending;
};

class FakeEpochStore final : public EpochStore {
 public:
  absl::StatusOr<int64_t> Load() override { return stored; }
  absl::Status Store(int64_t epoch) override {
    if (on_store) on_store(epoch);
    if (!store_status.ok()) return store_status;
    stored = epoch;
    ++stores;
    return absl::OkStatus();
  }
  int64_t stored = 0;
  int stores = 0;
  absl::Status store_status;
  std::function<void(int64_t)> on_store;
};

class FakeRequestSink final : public RequestSink {
 public:
  void OnLive(const LiveConnection& live, std::function<void(std::string)> send) override {
    lives.push_back(live);
    send_ = std::move(send);
  }
  int OnRequest(wire::Request request) override {
    requests.push_back(std::move(request));
    return close_code;
  }
  void OnGone() override { ++gone; }
  std::vector<wire::ActiveOperation> ActiveOperations() override { return active; }

  std::vector<LiveConnection> lives;
  std::vector<wire::Request> requests;
  std::vector<wire::ActiveOperation> active;
  int gone = 0;
  int close_code = 0;
  std::function<void(std::string)> send_;
};

class FakeGenerationControl final : public GenerationControl {
 public:
  void OnDeployment(const wire::Deployment& d) override { deployments.push_back(d); }
  void OnDisconnected() override { ++disconnects; }
  std::vector<wire::Observation> NextObservations() override {
    ++observation_calls;
    return observations;
  }
  std::vector<wire::Deployment> deployments;
  int disconnects = 0;
  int observation_calls = 0;
  std::vector<wire::Observation> observations;
};

}  // namespace sn::agent::testing

#endif  // SANDBOX_NODE_TESTS_AGENT_FAKES_CONNECTION_SEAMS_H_

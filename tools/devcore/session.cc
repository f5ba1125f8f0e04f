#include "tools/devcore/session.h"

#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/wire/codec.h"
#include "common/wire/limits.h"
#include "tools/devcore/crypto.h"
#include "tools/devcore/deployment.h"
#include "tools/devcore/health_json.h"

namespace sn::devcore {
namespace {

std::string FormatTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

// Rules of §3 that depend on the node's generation management, which the codec cannot know
// for a heartbeat: provider_ready is present iff the node is not generation-managing, and a
// diagnostic only accompanies provider_ready == false.
bool HealthShapeMatches(const wire::Health& h, bool generation_management) {
  if (generation_management) return !h.provider_ready.has_value() && !h.diagnostic.has_value();
  if (!h.provider_ready.has_value()) return false;
  return h.diagnostic.has_value() == !*h.provider_ready;
}

}  // namespace

Session::Session(SessionEnv env, SessionTransport* transport, std::string node_id,
                 std::string credential)
    : env_(env),
      transport_(transport),
      node_id_(std::move(node_id)),
      credential_(std::move(credential)),
      requests_(env.timers, env.clock) {}

Session::~Session() = default;

void Session::Start() {
  transport_->SetReadLimit(wire::kMaxControlFrameBytes);
  hello_timer_ = env_.timers->After(absl::Seconds(wire::kHelloDeadlineSeconds), [this] {
    if (state_ == State::kAwaitingHello) CloseWith(wire::kCloseHelloTimeout, "no hello");
  });
  ArmIdle();
}

void Session::ArmIdle() {
  idle_timer_ = env_.timers->After(absl::Seconds(wire::kIdleTimeoutSeconds), [this] {
    CloseWith(wire::kCloseIdle, "idle");
  });
}

void Session::OnFrameActivity() {
  if (state_ == State::kAwaitingHello || state_ == State::kLive) ArmIdle();
}

void Session::CloseWith(int code, std::string_view reason) {
  if (state_ != State::kAwaitingHello && state_ != State::kLive) return;
  state_ = State::kClosing;
  close_code_ = code;
  hello_timer_.reset();
  idle_timer_.reset();
  requests_.FailAll(reason);
  LogInfo("closing node connection", {{"node_id", node_id_},
                                       {"connection_id", connection_id_},
                                       {"code", code},
                                       {"reason", reason}});
  transport_->Close(code, reason);
}

void Session::OnTransportClosed() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  hello_timer_.reset();
  idle_timer_.reset();
  requests_.FailAll("connection closed");
}

void Session::Send(const wire::Frame& frame) { transport_->SendText(wire::Encode(frame)); }

void Session::OnMessage(std::string_view payload, bool text) {
  if (state_ != State::kAwaitingHello && state_ != State::kLive) return;
  if (!text) {
    CloseWith(wire::kCloseInvalidFrame, "binary message");
    return;
  }
  const size_t limit =
      state_ == State::kLive ? wire::kMaxFrameBytes : wire::kMaxControlFrameBytes;
  absl::StatusOr<wire::Frame> frame = wire::Decode(payload, wire::Role::kCore, limit);
  if (!frame.ok()) {
    LogInfo("invalid frame", {{"node_id", node_id_},
                              {"error", std::string(frame.status().message())}});
    CloseWith(wire::CloseCodeForDecodeError(frame.status()), "invalid frame");
    return;
  }
  if (state_ == State::kAwaitingHello) {
    if (const auto* hello = std::get_if<wire::Hello>(&*frame)) {
      OnHello(*hello);
    } else {
      // The node sends nothing before hello (§3).
      CloseWith(wire::kCloseInvalidFrame, "expected hello");
    }
    return;
  }
  if (const auto* hb = std::get_if<wire::Heartbeat>(&*frame)) {
    OnHeartbeat(*hb);
  } else if (const auto* r = std::get_if<wire::Retention>(&*frame)) {
    OnRetention(*r);
  } else if (const auto* resp = std::get_if<wire::Response>(&*frame)) {
    OnResponse(*resp, payload);
  } else {
    CloseWith(wire::kCloseInvalidFrame, "unexpected frame");  // a second hello
  }
}

void Session::OnHello(const wire::Hello& hello) {
  const NodeRecord* node = env_.store->Find(node_id_);
  if (node == nullptr || !env_.store->CredentialMatches(node_id_, credential_)) {
    CloseWith(wire::kCloseCredentialRejected, "credential rejected");
    return;
  }
  if (!HealthShapeMatches(hello.health, hello.generation_management)) {
    CloseWith(wire::kCloseInvalidFrame, "health does not match generation management");
    return;
  }
  const char* mismatch = nullptr;
  if (hello.node_id != node_id_) {
    mismatch = "node_id";
  } else if (hello.installation_id != node->installation_id) {
    mismatch = "installation_id";
  } else if (hello.provider != node->provider) {
    mismatch = "provider";
  } else if (hello.deployment_generation != node->deployment_generation) {
    mismatch = "deployment_generation";
  } else if (hello.specification_digest != node->specification_digest) {
    mismatch = "specification_digest";
  } else if (hello.generation_management != node->generation_management) {
    mismatch = "generation_management";
  }
  if (mismatch != nullptr) {
    LogWarning("hello identity mismatch", {{"node_id", node_id_}, {"member", mismatch}});
    CloseWith(wire::kCloseIdentityMismatch, absl::StrCat("identity mismatch: ", mismatch));
    return;
  }
  absl::StatusOr<std::string> connection_id = NewUuid();
  absl::Status recorded = env_.store->UpdateHelloFacts(node_id_, hello.backend_fingerprint,
                                                       hello.max_active, hello.max_retained);
  if (!connection_id.ok() || !recorded.ok()) {
    LogError("cannot record hello", {{"node_id", node_id_}});
    CloseWith(1011, "internal error");  // RFC 6455 internal error; the node retries
    return;
  }
  // Presence is recorded before welcome (requirements "Connection").
  generation_management_ = node->generation_management;
  connection_id_ = *std::move(connection_id);
  owner_epoch_ = node->owner_epoch;
  state_ = State::kLive;
  hello_timer_.reset();
  RecordHealth(hello.health, generation_management_ ? &hello.generations : nullptr);
  transport_->SetReadLimit(wire::kMaxFrameBytes);
  LogInfo("node connected", {{"node_id", node_id_},
                             {"connection_id", connection_id_},
                             {"owner_epoch", owner_epoch_}});
  RequestContext context;
  context.provider = node->provider;
  context.digest_of = [store = env_.store, generations = env_.generations,
                       node_id = node_id_](int64_t generation) -> std::optional<std::string> {
    const NodeRecord* n = store->Find(node_id);
    if (n == nullptr) return std::nullopt;
    return AnnouncedDigest(*n, *generations, generation);
  };
  requests_.Bind(connection_id_, owner_epoch_, std::move(context),
                 [this](std::string text) { transport_->SendText(std::move(text)); });
  bool failed = false;
  std::optional<wire::Deployment> deployment = AnnounceDeployment(*node, &failed);
  if (failed) return;
  wire::Welcome welcome;
  welcome.connection_id = connection_id_;
  welcome.owner_epoch = owner_epoch_;
  welcome.deployment = std::move(deployment);
  Send(welcome);
}

void Session::OnHeartbeat(const wire::Heartbeat& hb) {
  const NodeRecord* node = env_.store->Find(node_id_);
  if (node == nullptr || !env_.store->CredentialMatches(node_id_, credential_)) {
    CloseWith(wire::kCloseCredentialRejected, "credential rejected");
    return;
  }
  if (hb.connection_id != connection_id_) {
    CloseWith(wire::kCloseCorrelation, "wrong connection_id");
    return;
  }
  if (hb.owner_epoch != owner_epoch_ || node->owner_epoch != owner_epoch_) {
    CloseWith(wire::kCloseEpochMismatch, "owner epoch mismatch");
    return;
  }
  if (hb.generations.has_value() != generation_management_ ||
      !HealthShapeMatches(hb.health, generation_management_)) {
    CloseWith(wire::kCloseInvalidFrame, "heartbeat does not match generation management");
    return;
  }
  RecordHealth(hb.health, hb.generations.has_value() ? &*hb.generations : nullptr);
  ++env_.store->Runtime(node_id_).heartbeats;
  bool failed = false;
  std::optional<wire::Deployment> deployment = AnnounceDeployment(*node, &failed);
  if (failed) return;
  wire::HeartbeatAck ack;
  ack.connection_id = connection_id_;
  ack.owner_epoch = owner_epoch_;
  ack.deployment = std::move(deployment);
  Send(ack);
}

void Session::OnRetention(const wire::Retention& r) {
  if (!generation_management_) {
    CloseWith(wire::kCloseCorrelation, "retention from a node without generation management");
    return;
  }
  if (r.connection_id != connection_id_ || r.sequence != retention_sequence_ + 1) {
    CloseWith(wire::kCloseCorrelation, "retention correlation");
    return;
  }
  if (r.owner_epoch != owner_epoch_) {
    CloseWith(wire::kCloseEpochMismatch, "owner epoch mismatch");
    return;
  }
  retention_sequence_ = r.sequence;
  const NodeRecord* node = env_.store->Find(node_id_);
  if (node == nullptr) {
    CloseWith(wire::kCloseCredentialRejected, "credential rejected");
    return;
  }
  // keep:false only for a durably recorded drop that is neither target nor serving (§3).
  const std::optional<wire::Deployment> deployment = DeploymentFor(*node, *env_.generations);
  wire::RetentionAck ack;
  ack.id = r.id;
  ack.sequence = r.sequence;
  ack.connection_id = connection_id_;
  ack.owner_epoch = owner_epoch_;
  for (const auto& e : r.entries) {
    const bool keep =
        KeepInRetention(*node, deployment, GenerationRef{e.generation, e.specification_digest});
    ack.entries.push_back(wire::RetentionEntry{e.generation, e.specification_digest, keep});
    if (!keep) {
      LogInfo("drop granted", {{"node_id", node_id_},
                               {"generation", e.generation},
                               {"sequence", r.sequence}});
    }
  }
  Send(ack);
}

void Session::OnResponse(const wire::Response& r, std::string_view raw) {
  if (std::optional<int> code = requests_.OnResponse(r, raw)) {
    CloseWith(*code, "response correlation");
  }
}

void Session::SendRequest(const AdminRequest& req, RequestDone done) {
  if (state_ != State::kLive) {
    done(RequestOutcome{409, "{\"error\":\"the node is not connected\"}", std::nullopt});
    return;
  }
  requests_.Send(req, std::move(done));
}

void Session::SendRequest(PreparedRequest req, RequestDone done) {
  if (state_ != State::kLive) {
    done(RequestOutcome{409, "{\"error\":\"the node is not connected\"}", std::nullopt});
    return;
  }
  requests_.Send(std::move(req), std::move(done));
}

std::optional<wire::Deployment> Session::AnnounceDeployment(const NodeRecord& node,
                                                            bool* failed) {
  *failed = false;
  if (!node.generation_management) return std::nullopt;
  std::optional<wire::Deployment> d = DeploymentFor(node, *env_.generations);
  if (!d.has_value()) {
    LogError("the node's deployment names a generation devcore does not hold",
             {{"node_id", node_id_}});
    *failed = true;
    CloseWith(1011, "internal error");
    return std::nullopt;
  }
  // Durable before it is sent: a generation the node may act on is always "announced".
  absl::Status recorded = env_.store->RecordAnnounced(node_id_, NamedGenerations(*d));
  if (!recorded.ok()) {
    LogError("cannot record an announced deployment",
             {{"node_id", node_id_}, {"error", std::string(recorded.message())}});
    *failed = true;
    CloseWith(1011, "internal error");
    return std::nullopt;
  }
  return d;
}

void Session::RecordHealth(const wire::Health& health,
                           const std::vector<wire::Observation>* generations) {
  NodeRuntime& rt = env_.store->Runtime(node_id_);
  rt.last_health_json = HealthToJson(health);
  if (generations != nullptr) rt.last_generations_json = ObservationsToJson(*generations);
  rt.last_seen_at = FormatTimestamp(env_.clock->Now());
}

}  // namespace sn::devcore

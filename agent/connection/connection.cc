#include "agent/connection/connection.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/random.h"
#include "common/wire/codec.h"
#include "common/wire/limits.h"

namespace sn::agent {
namespace {

constexpr int kCloseGoingAway = 1001;

void Notify(const std::function<void(std::string_view)>& hook, const std::string& why) {
  if (hook) hook(why);
}
constexpr int kCloseInternalError = 1011;

std::string ToStd(absl::string_view s) { return std::string(s.data(), s.size()); }

// Truncates to at most `max` bytes without splitting a UTF-8 sequence.
std::string TruncateUtf8(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s;
}

}  // namespace

std::string_view ConnectionStateName(Connection::State s) {
  switch (s) {
    case Connection::State::kIdle: return "idle";
    case Connection::State::kDialing: return "dialing";
    case Connection::State::kAwaitingHello: return "awaiting_hello";
    case Connection::State::kAwaitingWelcome: return "awaiting_welcome";
    case Connection::State::kLive: return "live";
    case Connection::State::kClosing: return "closing";
    case Connection::State::kBackoff: return "backoff";
    case Connection::State::kStopped: return "stopped";
  }
  return "unknown";
}

Connection::Connection(ConnectionParams params, Transport* transport, const Clock* clock,
                       TimerQueue* timers, HealthSource* health, EpochStore* epochs,
                       Backoff backoff, RequestSink* requests,
                       std::function<void(absl::Status)> done)
    : params_(std::move(params)),
      transport_(transport),
      clock_(clock),
      timers_(timers),
      health_(health),
      epochs_(epochs),
      backoff_(std::move(backoff)),
      requests_(requests),
      done_(std::move(done)) {
  transport_->SetEvents(this);
}

Connection::~Connection() { alive_.reset(); }

void Connection::Start() {
  if (state_ != State::kIdle) return;
  Dial();
}

void Connection::Stop() {
  stop_requested_ = true;
  switch (state_) {
    case State::kIdle:
    case State::kBackoff:
      StopForGood(absl::OkStatus());
      break;
    case State::kAwaitingHello:
    case State::kAwaitingWelcome:
    case State::kLive:
      CloseWith(kCloseGoingAway, "agent stopping");
      break;
    case State::kDialing:  // OnDialResult finishes the stop.
    case State::kClosing:  // OnClosed finishes the stop.
    case State::kStopped:
      break;
  }
}

void Connection::Dial() {
  ++attempt_;
  sent_close_code_ = 0;
  state_ = State::kDialing;
  live_.reset();
  live_since_.reset();
  heartbeat_in_flight_ = false;
  transport_->Dial(wire::kMaxControlFrameBytes);
}

void Connection::OnDialResult(const DialResult& result) {
  if (state_ != State::kDialing) return;
  if (result.kind == DialResult::Kind::kUpgraded) {
    if (stop_requested_) {
      state_ = State::kAwaitingHello;
      CloseWith(kCloseGoingAway, "agent stopping");
      return;
    }
    LogInfo("WebSocket upgraded; sending hello", {{"attempt", attempt_}});
    state_ = State::kAwaitingHello;
    ArmIdleTimer();
    const uint64_t attempt = attempt_;
    std::weak_ptr<bool> alive = alive_;
    health_->Collect([this, alive, attempt](HealthReport report) {
      if (alive.expired() || attempt != attempt_ || state_ != State::kAwaitingHello) return;
      SendHello(std::move(report));
    });
    return;
  }
  if (stop_requested_) {
    StopForGood(absl::OkStatus());
    return;
  }
  if (result.kind == DialResult::Kind::kHttpStatus && result.http_status == 401) {
    LogError(
        "Core rejected the node credential (HTTP 401); not retrying. Re-enroll this node "
        "(agent enroll) to get a new credential.");
    StopForGood(absl::UnauthenticatedError("Core rejected the node credential (HTTP 401)"));
    return;
  }
  if (result.kind == DialResult::Kind::kHttpStatus) {
    LogWarning("Core refused the connection; retrying",
               {{"http_status", result.http_status}, {"detail", result.detail}});
    Notify(params_.events.redial, absl::StrCat("http_", result.http_status));
  } else {
    LogWarning("cannot reach Core; retrying", {{"detail", result.detail}});
    Notify(params_.events.redial, "unreachable");
  }
  ScheduleRedial(false);
}

wire::Health Connection::PrepareHealth(wire::Health h) {
  if (params_.generation_management) {
    // A generation-managing node reports readiness per generation (§3 health).
    h.provider_ready.reset();
    h.diagnostic.reset();
  }
  h.active_operations = requests_->ActiveOperations();
  if (h.active_operations.size() > wire::kMaxActiveOperations) {
    h.active_operations.resize(wire::kMaxActiveOperations);
  }
  return h;
}

void Connection::SendHello(HealthReport report) {
  wire::Hello hello;
  hello.node_id = params_.node_id;
  hello.installation_id = params_.installation_id;
  hello.provider = params_.provider;
  hello.backend_fingerprint =
      TruncateUtf8(std::move(report.backend_fingerprint), wire::kMaxBackendFingerprintBytes);
  hello.deployment_generation = params_.deployment_generation;
  hello.specification_digest = params_.specification_digest;
  const ProviderLimits limits = report.limits.value_or(params_.limits);
  hello.max_active = limits.max_active;
  hello.max_retained = limits.max_retained;
  hello.health = PrepareHealth(std::move(report.health));
  hello.generation_management = params_.generation_management;
  if (params_.generation_management && params_.generations != nullptr) {
    hello.generations = params_.generations->NextObservations();
  }
  state_ = State::kAwaitingWelcome;
  transport_->Send(wire::Encode(wire::Frame(std::move(hello))));
}

void Connection::OnActivity() {
  if (state_ == State::kAwaitingHello || state_ == State::kAwaitingWelcome ||
      state_ == State::kLive) {
    last_activity_ = clock_->Monotonic();
  }
}

void Connection::OnMessage(std::string payload, bool text) {
  if (state_ != State::kAwaitingHello && state_ != State::kAwaitingWelcome &&
      state_ != State::kLive) {
    return;  // closing: nothing more is read
  }
  last_activity_ = clock_->Monotonic();
  if (!text) {
    CloseWith(wire::kCloseInvalidFrame, "binary message");
    return;
  }
  const size_t limit =
      state_ == State::kLive ? wire::kMaxFrameBytes : wire::kMaxControlFrameBytes;
  absl::StatusOr<wire::Frame> frame = wire::Decode(payload, wire::Role::kNode, limit);
  if (!frame.ok()) {
    CloseWith(wire::CloseCodeForDecodeError(frame.status()),
              ToStd(frame.status().message()));
    return;
  }
  const wire::FrameType type = wire::TypeOf(*frame);
  if (state_ != State::kLive) {
    if (state_ == State::kAwaitingWelcome && type == wire::FrameType::kWelcome) {
      HandleWelcome(std::get<wire::Welcome>(*frame));
    } else {
      CloseWith(wire::kCloseInvalidFrame,
                absl::StrCat("unexpected ", std::string(wire::FrameTypeName(type)),
                             " before welcome"));
    }
    return;
  }
  switch (type) {
    case wire::FrameType::kHeartbeatAck:
      HandleHeartbeatAck(std::get<wire::HeartbeatAck>(*frame));
      return;
    case wire::FrameType::kRetentionAck:
      HandleRetentionAck(std::get<wire::RetentionAck>(*frame));
      return;
    case wire::FrameType::kRequest: {
      wire::Request& req = std::get<wire::Request>(*frame);
      if (req.connection_id != live_->connection_id) {
        CloseWith(wire::kCloseCorrelation, "request for another connection_id");
        return;
      }
      if (req.owner_epoch != live_->owner_epoch) {
        CloseWith(wire::kCloseEpochMismatch, "request with another owner_epoch");
        return;
      }
      const int code = requests_->OnRequest(std::move(req));
      if (code != 0) CloseWith(code, "request refused by the request layer");
      return;
    }
    default:
      CloseWith(wire::kCloseInvalidFrame,
                absl::StrCat("unexpected ", std::string(wire::FrameTypeName(type)),
                             " on a live connection"));
      return;
  }
}

void Connection::HandleWelcome(const wire::Welcome& w) {
  if (w.deployment.has_value() != params_.generation_management) {
    CloseWith(wire::kCloseInvalidFrame,
              params_.generation_management ? "welcome without deployment"
                                            : "welcome with deployment for a node without "
                                              "generation management");
    return;
  }
  absl::StatusOr<int64_t> stored = epochs_->Load();
  if (!stored.ok()) {
    LogError("cannot read the stored owner epoch",
             {{"error", ToStd(stored.status().ToString())}});
    CloseWith(kCloseInternalError, "owner epoch store unreadable");
    return;
  }
  if (w.owner_epoch < *stored) {
    LogWarning("welcome carries a lower owner epoch than stored; closing",
               {{"owner_epoch", w.owner_epoch}, {"stored_owner_epoch", *stored}});
    CloseWith(wire::kCloseEpochMismatch, "lower owner epoch");
    return;
  }
  if (w.owner_epoch > *stored) {
    // Durable before anything else is sent on this connection (§3 welcome).
    absl::Status st = epochs_->Store(w.owner_epoch);
    if (!st.ok()) {
      LogError("cannot persist the owner epoch", {{"error", ToStd(st.ToString())}});
      CloseWith(kCloseInternalError, "owner epoch not persisted");
      return;
    }
  }
  live_ = LiveConnection{w.connection_id, w.owner_epoch};
  live_since_ = clock_->Monotonic();
  state_ = State::kLive;
  if (params_.events.live) params_.events.live(w.owner_epoch);
  transport_->SetReadLimit(wire::kMaxFrameBytes);
  LogInfo("connected",
          {{"connection_id", w.connection_id}, {"owner_epoch", w.owner_epoch}});
  if (w.deployment.has_value() && params_.generations != nullptr) {
    params_.generations->OnDeployment(*w.deployment);
  }
  heartbeat_timer_ = timers_->After(absl::Seconds(wire::kHeartbeatIntervalSeconds),
                                    [this] { HeartbeatTick(); });
  std::weak_ptr<bool> alive = alive_;
  const uint64_t attempt = attempt_;
  requests_->OnLive(*live_, [this, alive, attempt](std::string text) {
    if (alive.expired() || attempt != attempt_ || state_ != State::kLive) return;
    transport_->Send(std::move(text));
  });
  next_retention_sequence_ = 1;
  retention_pending_.reset();
  if (params_.generation_management && params_.retention != nullptr) {
    params_.retention->OnLive();
    MaybeStartRetention();
  }
}

void Connection::MaybeStartRetention() {
  if (state_ != State::kLive || !params_.generation_management ||
      params_.retention == nullptr || retention_pending_.has_value()) {
    return;
  }
  std::vector<wire::RetentionEntry> entries = params_.retention->NextRetentionRequest();
  if (entries.empty()) return;
  if (entries.size() > wire::kMaxRetentionEntries) entries.resize(wire::kMaxRetentionEntries);
  absl::StatusOr<std::string> id = NewUuidV4();
  if (!id.ok()) {
    LogError("cannot make a retention exchange id; asking later",
             {{"error", ToStd(id.status().message())}});
    return;
  }
  wire::Retention r;
  r.id = *id;
  r.sequence = next_retention_sequence_++;
  r.connection_id = live_->connection_id;
  r.owner_epoch = live_->owner_epoch;
  for (wire::RetentionEntry& e : entries) {
    e.keep.reset();
    r.entries.push_back(std::move(e));
  }
  const int64_t sequence = r.sequence;
  const uint64_t attempt = attempt_;
  retention_timer_ = timers_->After(absl::Seconds(wire::kRetentionAckTimeoutSeconds),
                                    [this, attempt, sequence] {
                                      RetentionTimedOut(attempt, sequence);
                                    });
  LogInfo("asking Core about retention",
          {{"id", r.id}, {"sequence", r.sequence},
           {"entries", static_cast<int64_t>(r.entries.size())}});
  std::string text = wire::Encode(wire::Frame(r));
  retention_pending_ = std::move(r);
  transport_->Send(std::move(text));
}

void Connection::RetentionTimedOut(uint64_t attempt, int64_t sequence) {
  if (attempt != attempt_ || state_ != State::kLive || !retention_pending_.has_value() ||
      retention_pending_->sequence != sequence) {
    return;
  }
  Notify(params_.events.retention, "timed_out");
  CloseWith(wire::kCloseRetentionTimeout, "no retention_ack within 30 s");
}

void Connection::HandleRetentionAck(const wire::RetentionAck& ack) {
  // Unsolicited (none pending: replayed, late from an earlier connection, or a node without
  // generation management), or not the complete pending request: nothing is learned from it,
  // so nothing can be deleted, and the connection closes (spec §3; docs/protocol.md 14j).
  if (!params_.generation_management || params_.retention == nullptr) {
    CloseWith(wire::kCloseCorrelation, "retention_ack to a node without generation management");
    return;
  }
  if (!retention_pending_.has_value()) {
    CloseWith(wire::kCloseCorrelation, "unsolicited retention_ack");
    return;
  }
  const wire::Retention& p = *retention_pending_;
  std::string_view mismatch;
  if (ack.id != p.id) {
    mismatch = "retention_ack id differs from the pending exchange";
  } else if (ack.sequence != p.sequence) {
    mismatch = "retention_ack sequence differs from the pending exchange";
  } else if (ack.connection_id != p.connection_id) {
    mismatch = "retention_ack for another connection_id";
  } else if (ack.owner_epoch != p.owner_epoch) {
    mismatch = "retention_ack with another owner_epoch";
  } else if (ack.entries.size() != p.entries.size()) {
    mismatch = "retention_ack entries differ in number from the pending request";
  } else {
    for (size_t i = 0; i < ack.entries.size(); ++i) {
      const wire::RetentionEntry& a = ack.entries[i];
      const wire::RetentionEntry& q = p.entries[i];
      if (a.generation != q.generation || a.specification_digest != q.specification_digest) {
        mismatch = "retention_ack entries differ from the pending request or its order";
        break;
      }
      if (!a.keep.has_value()) {
        mismatch = "retention_ack entry without keep";
        break;
      }
    }
  }
  if (!mismatch.empty()) {
    Notify(params_.events.retention, "mismatched");
    CloseWith(wire::kCloseCorrelation, mismatch);
    return;
  }
  retention_pending_.reset();
  retention_timer_.reset();
  bool drop = false;
  for (const wire::RetentionEntry& e : ack.entries) drop = drop || !e.keep.value_or(true);
  Notify(params_.events.retention, drop ? "drop_granted" : "all_kept");
  params_.retention->OnRetentionAnswer(ack.entries);
}

void Connection::HandleHeartbeatAck(const wire::HeartbeatAck& ack) {
  if (ack.connection_id != live_->connection_id) {
    CloseWith(wire::kCloseCorrelation, "heartbeat_ack for another connection_id");
    return;
  }
  if (ack.owner_epoch != live_->owner_epoch) {
    CloseWith(wire::kCloseEpochMismatch, "heartbeat_ack with another owner_epoch");
    return;
  }
  if (ack.deployment.has_value() != params_.generation_management) {
    CloseWith(wire::kCloseInvalidFrame, "heartbeat_ack deployment presence mismatch");
    return;
  }
  if (ack.deployment.has_value() && params_.generations != nullptr) {
    params_.generations->OnDeployment(*ack.deployment);
  }
}

void Connection::HeartbeatTick() {
  if (state_ != State::kLive) return;
  heartbeat_timer_ = timers_->After(absl::Seconds(wire::kHeartbeatIntervalSeconds),
                                    [this] { HeartbeatTick(); });
  // Retention has its own cadence (docs/protocol.md 14k): at most one exchange per tick,
  // never behind a health collection or the request queue.
  MaybeStartRetention();
  if (heartbeat_in_flight_) {
    LogWarning("previous health report still being collected; skipping a heartbeat");
    if (params_.events.heartbeat_missed) params_.events.heartbeat_missed();
    return;
  }
  heartbeat_in_flight_ = true;
  const uint64_t attempt = attempt_;
  std::weak_ptr<bool> alive = alive_;
  health_->Collect([this, alive, attempt](HealthReport report) {
    if (alive.expired() || attempt != attempt_) return;
    heartbeat_in_flight_ = false;
    if (state_ != State::kLive) return;
    SendHeartbeat(std::move(report));
  });
}

void Connection::SendHeartbeat(HealthReport report) {
  wire::Heartbeat hb;
  hb.connection_id = live_->connection_id;
  hb.owner_epoch = live_->owner_epoch;
  hb.health = PrepareHealth(std::move(report.health));
  if (params_.generation_management) {
    hb.generations = params_.generations != nullptr ? params_.generations->NextObservations()
                                                    : std::vector<wire::Observation>{};
  }
  transport_->Send(wire::Encode(wire::Frame(std::move(hb))));
  if (params_.events.heartbeat_sent) params_.events.heartbeat_sent();
}

void Connection::ArmIdleTimer() {
  last_activity_ = clock_->Monotonic();
  idle_timer_ =
      timers_->After(absl::Seconds(wire::kIdleTimeoutSeconds), [this] { IdleCheck(); });
}

void Connection::IdleCheck() {
  if (state_ != State::kAwaitingHello && state_ != State::kAwaitingWelcome &&
      state_ != State::kLive) {
    return;
  }
  const absl::Duration idle = absl::Seconds(wire::kIdleTimeoutSeconds);
  const absl::Duration quiet = clock_->Monotonic() - last_activity_;
  if (quiet >= idle) {
    CloseWith(wire::kCloseIdle, "no frame received for 35 s");
    return;
  }
  idle_timer_ = timers_->After(idle - quiet, [this] { IdleCheck(); });
}

void Connection::CancelConnectionTimers() {
  idle_timer_.reset();
  heartbeat_timer_.reset();
  retention_timer_.reset();
}

void Connection::CloseWith(int code, std::string_view reason) {
  if (state_ != State::kAwaitingHello && state_ != State::kAwaitingWelcome &&
      state_ != State::kLive) {
    return;
  }
  LogWarning("closing the connection to Core",
             {{"close_code", code}, {"reason", std::string(reason)}});
  sent_close_code_ = code;
  CancelConnectionTimers();
  if (live_.has_value()) LiveEnded();
  state_ = State::kClosing;
  transport_->Close(code);
}

void Connection::OnClosed(const CloseInfo& info) {
  const bool open = state_ == State::kAwaitingHello || state_ == State::kAwaitingWelcome ||
                    state_ == State::kLive;
  if (!open && state_ != State::kClosing) return;
  CancelConnectionTimers();
  if (open && live_.has_value()) LiveEnded();
  if (info.peer_close_frame && info.peer_code == wire::kCloseCredentialRejected) {
    LogError(
        "Core rejected the node credential (close 4004); not retrying. Re-enroll this node "
        "(agent enroll) to get a new credential.");
    StopForGood(absl::UnauthenticatedError("Core rejected the node credential (close 4004)"));
    return;
  }
  if (stop_requested_) {
    StopForGood(absl::OkStatus());
    return;
  }
  const bool identity_mismatch =
      open && info.peer_close_frame && info.peer_code == wire::kCloseIdentityMismatch;
  if (identity_mismatch) {
    LogError(
        "Core closed the connection: hello identity does not match the enrolled node (4003); "
        "check identity.json against Core's record");
  } else if (open) {
    LogWarning("connection to Core closed",
               {{"peer_close_code", info.peer_code}, {"detail", info.detail}});
  }
  const int code = info.peer_close_frame ? info.peer_code
                   : sent_close_code_ != 0 ? sent_close_code_
                                           : 1006;  // ended without a close frame
  Notify(params_.events.redial, absl::StrCat(code));
  ScheduleRedial(identity_mismatch);
}

void Connection::LiveEnded() {
  // A pending retention exchange is discarded: nothing it asked about may be deleted.
  retention_pending_.reset();
  retention_timer_.reset();
  requests_->OnGone();
  if (params_.generation_management && params_.retention != nullptr) {
    params_.retention->OnLiveEnded();
  }
  if (params_.generations != nullptr) params_.generations->OnDisconnected();
}

void Connection::ScheduleRedial(bool identity_mismatch) {
  if (live_since_.has_value() &&
      clock_->Monotonic() - *live_since_ >=
          absl::Seconds(wire::kBackoffResetAfterLiveSeconds)) {
    backoff_.Reset();
  }
  live_.reset();
  live_since_.reset();
  const absl::Duration delay = identity_mismatch ? backoff_.Max() : backoff_.Next();
  last_backoff_delay_ = delay;
  state_ = State::kBackoff;
  LogInfo("reconnecting after a delay",
          {{"delay_ms", static_cast<int64_t>(absl::ToInt64Milliseconds(delay))}});
  redial_timer_ = timers_->After(delay, [this] {
    if (state_ == State::kBackoff) Dial();
  });
}

void Connection::StopForGood(absl::Status status) {
  state_ = State::kStopped;
  CancelConnectionTimers();
  redial_timer_.reset();
  live_.reset();
  if (done_) {
    auto done = std::move(done_);
    done_ = nullptr;
    done(std::move(status));
  }
}

}  // namespace sn::agent

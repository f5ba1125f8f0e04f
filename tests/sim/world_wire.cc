// The WebSockets between the agent and Core: dials, frames in order per direction, cuts and closes.
#include "tests/sim/world_internal.h"

namespace sn::sim::internal {

void World::Dial() {
  if (AgentDead()) return;
  const uint64_t inc = incarnation_;
  Post(rng_.Millis(1, 200), [this, inc] {
    if (inc != incarnation_ || agent_ == nullptr || transport_.events() == nullptr) return;
    agent::DialResult r;
    if (clock_.Monotonic() < core_down_until_) {
      r.kind = agent::DialResult::Kind::kTransportError;
      Event("dial unreachable");
      transport_.events()->OnDialResult(r);
      return;
    }
    if (rng_.Chance(rates_.dial_refused)) {
      r.kind = agent::DialResult::Kind::kHttpStatus;
      r.http_status = 503;
      Event("dial 503");
      transport_.events()->OnDialResult(r);
      return;
    }
    Wire w;
    w.serial = ++next_serial_;
    w.stale = stale_armed_ && core_epoch_ > 1;
    stale_armed_ = false;
    w.epoch = w.stale ? core_epoch_ - 1 : core_epoch_;
    w.next_to_agent = w.next_to_core = clock_.Monotonic();
    current_ = w.serial;
    wires_[w.serial] = std::move(w);
    ++counters_["dials_upgraded"];
    Event(absl::StrCat("dial upgraded serial=", current_));
    r.kind = agent::DialResult::Kind::kUpgraded;
    r.http_status = 101;
    transport_.events()->OnDialResult(r);
  });
}

void World::AgentSend(std::string text) {
  if (AgentDead() || current_ == 0) return;
  Wire& w = wires_.at(current_);
  if (w.agent_closing || !w.agent_open) return;
  const uint64_t serial = w.serial;
  const MonoTime at = Latency(&w.next_to_core);
  Post(at - clock_.Monotonic(), [this, serial, text = std::move(text)] {
    auto it = wires_.find(serial);
    if (it == wires_.end() || !it->second.core_open) return;
    CoreReceive(it->second, text);
  });
}

void World::AgentClose(int code) {
  if (AgentDead() || current_ == 0) return;
  Wire& w = wires_.at(current_);
  if (w.agent_closing) return;
  w.agent_closing = true;
  const uint64_t serial = w.serial;
  Event(absl::StrCat("agent closes serial=", serial, " code=", code));
  ++counters_[absl::StrCat("agent_close_", code)];
  const MonoTime at = Latency(&w.next_to_core);
  Post(at - clock_.Monotonic(), [this, serial, code] {
    Wire& w = wires_.at(serial);
    if (!w.core_open) {
      // Core is gone: the transport bounds the handshake.
      AgentClosed(serial, agent::CloseInfo{false, 0, "close handshake timed out"},
                  absl::Seconds(1));
      return;
    }
    w.core_open = false;  // Core echoes the close frame
    AgentClosed(serial, agent::CloseInfo{true, code, "echo"}, rng_.Millis(1, 50));
  });
}

MonoTime World::Latency(MonoTime* next) {
  absl::Duration lat = rng_.Millis(1, 40);
  if (rng_.Chance(rates_.frame_delay)) {
    lat = rng_.Millis(100, 20000);
    ++counters_["frames_delayed"];
  }
  // Never reordered within one WebSocket.
  *next = std::max(*next, clock_.Monotonic() + lat);
  return *next;
}

void World::ToAgent(Wire& w, std::string text, bool is_text) {
  if (!w.core_open) return;
  Hash(text);
  if (options_.trace) std::fprintf(stderr, "  core> %s\n", text.c_str());
  const uint64_t serial = w.serial;
  const MonoTime at = Latency(&w.next_to_agent);
  Post(at - clock_.Monotonic(), [this, serial, is_text, text = std::move(text)]() mutable {
    Wire& w = wires_.at(serial);
    if (!w.agent_open || w.agent_closing || serial != current_ || AgentDead() ||
        transport_.events() == nullptr) {
      return;
    }
    transport_.events()->OnActivity();
    transport_.events()->OnMessage(std::move(text), is_text);
  });
}

void World::AgentClosed(uint64_t serial, agent::CloseInfo info, absl::Duration delay) {
  const uint64_t inc = incarnation_;
  Post(delay, [this, serial, inc, info] {
    Wire& w = wires_.at(serial);
    if (!w.agent_open) return;
    w.agent_open = false;
    if (serial == current_) current_ = 0;
    if (inc != incarnation_ || AgentDead() || transport_.events() == nullptr) return;
    transport_.events()->OnClosed(info);
  });
}

void World::Cut(Wire& w) {
  Event(absl::StrCat("cut serial=", w.serial));
  w.core_open = false;
  AgentClosed(w.serial, agent::CloseInfo{false, 0, "cut"}, rng_.Millis(1, 3000));
}

void World::CoreClose(Wire& w, int code) {
  Event(absl::StrCat("core closes serial=", w.serial, " code=", code));
  const MonoTime at = Latency(&w.next_to_agent);
  w.core_open = false;
  AgentClosed(w.serial, agent::CloseInfo{true, code, "core closed"}, at - clock_.Monotonic());
}

}  // namespace sn::sim::internal

#include "agent/metrics/node_status.h"

#include "absl/strings/str_cat.h"
#include "common/diagnostics.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

using nlohmann::ordered_json;

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

ordered_json TimeOrNull(const std::optional<absl::Time>& t) {
  return t.has_value() ? ordered_json(Rfc3339(*t)) : ordered_json(nullptr);
}

}  // namespace

void RecentOutcomes::Add(MonoTime now, std::string_view outcome) {
  const int64_t second = absl::ToInt64Seconds(now - MonoTime());
  Bucket& b = buckets_[static_cast<size_t>(second % 60)];
  if (b.second != second) {
    b.second = second;
    b.counts.clear();
  }
  ++b.counts[std::string(outcome)];
}

std::map<std::string, int64_t> RecentOutcomes::LastMinute(MonoTime now) const {
  const int64_t second = absl::ToInt64Seconds(now - MonoTime());
  std::map<std::string, int64_t> out;
  for (const Bucket& b : buckets_) {
    if (b.second < 0 || b.second <= second - 60) continue;
    for (const auto& [k, n] : b.counts) out[k] += n;
  }
  return out;
}

void NodeStatus::RequestAnswered(std::string_view operation, std::string_view outcome) {
  const std::string_view label = AgentMetrics::OutcomeLabel(outcome);
  recent_.Add(clock_->Monotonic(), label);
  if (label != "success") {
    last_error_ = LastError{std::string(AgentMetrics::OperationLabel(operation)),
                            std::string(label), clock_->Now()};
  }
}

void NodeStatus::Live() { since_ = clock_->Now(); }

void NodeStatus::Redial(std::string_view why) {
  since_ = clock_->Now();
  last_close_ = std::string(AgentMetrics::RedialLabel(why));
}

void NodeStatus::PreparationProgress(int64_t generation, const std::string& phase,
                                     int64_t bytes_done, bool finished) {
  if (finished) {
    rates_.erase(generation);
    return;
  }
  auto it = rates_.find(generation);
  if (it == rates_.end() || it->second.phase != phase) {
    rates_[generation] = Rate{phase, clock_->Monotonic(), bytes_done};
  }
}

std::string NodeStatus::Json(const NodeView& v) const {
  ordered_json doc;
  doc["schema"] = 1;
  doc["generated_at"] = Rfc3339(clock_->Now());
  const Connection* c = v.connection ? v.connection() : nullptr;
  doc["connection"] = {
      {"state",
       std::string(ConnectionStateName(c != nullptr ? c->state() : Connection::State::kIdle))},
      {"since", TimeOrNull(since_)},
      {"owner_epoch", *v.owner_epoch},
      {"last_close", last_close_.has_value() ? ordered_json(*last_close_) : ordered_json(nullptr)}};
  const std::optional<ProbeOutcome>& p = *v.last_probe;
  ordered_json provider = {
      {"privhelper", probe_failed_at_.has_value() ? "not answering" : "answering"},
      {"last_probe", TimeOrNull(last_probe_at_)},
      {"failing_since", TimeOrNull(probe_failed_at_)}};
  if (p.has_value()) {
    provider["name"] = p->provider;
    provider["ready"] = p->ready;
    provider["diagnostic"] =
        p->ready ? ordered_json(nullptr) : ordered_json(std::string(DiagnosticCode(p->diagnostic)));
    provider["backend_fingerprint"] = p->backend_fingerprint;
    ordered_json sandboxes = {{"max_active", p->limits.max_active},
                              {"max_retained", p->limits.max_retained}};
    if (p->sandboxes.has_value()) {
      sandboxes["active"] = p->sandboxes->active;
      sandboxes["retained"] = p->sandboxes->retained;
    }
    doc["sandboxes"] = sandboxes;
  }
  doc["provider"] = provider;
  ordered_json gens = ordered_json::array();
  const MonoTime now = clock_->Monotonic();
  for (const GenerationStatus& s : v.generations->Snapshot()) {
    ordered_json g = {{"generation", s.ref.generation},
                      {"state", std::string(wire::GenerationStateName(s.state))},
                      {"diagnostic", s.diagnostic.has_value()
                                         ? ordered_json(std::string(DiagnosticCode(*s.diagnostic)))
                                         : ordered_json(nullptr)},
                      {"target", s.target},
                      {"serving", s.serving}};
    if (s.progress.has_value()) {
      ordered_json prog = {{"phase", s.progress->phase},
                           {"bytes_done", s.progress->bytes_done},
                           {"bytes_total", s.progress->bytes_total},
                           {"eta_seconds", nullptr}};
      auto r = rates_.find(s.ref.generation);
      if (r != rates_.end() && r->second.phase == s.progress->phase) {
        const double secs = absl::ToDoubleSeconds(now - r->second.started);
        const int64_t moved = s.progress->bytes_done - r->second.bytes_at_start;
        if (secs >= 1 && moved > 0 && s.progress->bytes_total >= s.progress->bytes_done) {
          prog["eta_seconds"] = static_cast<int64_t>(
              static_cast<double>(s.progress->bytes_total - s.progress->bytes_done) * secs /
              static_cast<double>(moved));
        }
      }
      g["preparation"] = prog;
    }
    gens.push_back(g);
  }
  doc["generations"] = gens;
  doc["requests"] = {{"pending", v.queue->pending()},
                     {"in_flight", v.queue->in_flight()},
                     {"last_minute", recent_.LastMinute(now)}};
  doc["last_error"] = last_error_.has_value() ? ordered_json{{"operation", last_error_->operation},
                                                             {"outcome", last_error_->outcome},
                                                             {"at", Rfc3339(last_error_->at)}}
                                              : ordered_json(nullptr);
  return doc.dump() + "\n";
}

}  // namespace sn::agent

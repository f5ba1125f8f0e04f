#include "agent/metrics/node_collectors.h"

#include <algorithm>
#include <array>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/diagnostics.h"
#include "common/metrics/process_figures.h"

namespace sn::agent {
namespace {

using metrics::Exposition;

constexpr std::array kStates = {
    Connection::State::kIdle,          Connection::State::kDialing,
    Connection::State::kAwaitingHello, Connection::State::kAwaitingWelcome,
    Connection::State::kLive,          Connection::State::kClosing,
    Connection::State::kBackoff,       Connection::State::kStopped};

void Requests(Exposition& e, const RequestQueue& q) {
  e.Family("sandbox_node_requests_pending",
           "Requests of the live connection not yet answered (the spec bounds them at 32).",
           "gauge");
  e.Sample("sandbox_node_requests_pending", {}, static_cast<double>(q.pending()));
  e.Family("sandbox_node_requests_in_flight",
           "Operations queued or running on this node, whatever connection they came on.", "gauge");
  e.Sample("sandbox_node_requests_in_flight", {}, static_cast<double>(q.in_flight()));
  e.Family("sandbox_node_requests_waiting_for_payload_room",
           "Requests with a payload waiting for privhelper's admission bound.", "gauge");
  e.Sample("sandbox_node_requests_waiting_for_payload_room", {},
           static_cast<double>(q.payloads_waiting()));
}

void ConnectionFamilies(Exposition& e, const Connection* c, int64_t epoch) {
  e.Family("sandbox_node_connection_state",
           "The connection to Core: 1 for its current state, 0 for the others.", "gauge");
  const Connection::State now = c != nullptr ? c->state() : Connection::State::kIdle;
  for (Connection::State s : kStates) {
    e.Sample("sandbox_node_connection_state", {{"state", std::string(ConnectionStateName(s))}},
             s == now ? 1 : 0);
  }
  e.Family("sandbox_node_owner_epoch", "The owner epoch of the latest live connection.", "gauge");
  e.Sample("sandbox_node_owner_epoch", {}, static_cast<double>(epoch));
}

void Generations(Exposition& e, const GenerationManager& g, const RequestQueue& q,
                 const std::optional<ProbeOutcome>& probe) {
  const std::vector<GenerationStatus> all = g.Snapshot();
  e.Family("sandbox_node_generation_state",
           "Each generation the node knows: 1 for its state (ready, preparing, failed).", "gauge");
  for (const GenerationStatus& s : all) {
    const std::string gen = absl::StrCat(s.ref.generation);
    for (wire::GenerationState st :
         {wire::GenerationState::kReady, wire::GenerationState::kPreparing,
          wire::GenerationState::kFailed}) {
      e.Sample("sandbox_node_generation_state",
               {{"generation", gen}, {"state", std::string(wire::GenerationStateName(st))}},
               st == s.state ? 1 : 0);
    }
  }
  e.Family("sandbox_node_generation_diagnostic",
           "1 for a generation that is not ready, labelled with its diagnostic code.", "gauge");
  for (const GenerationStatus& s : all) {
    if (!s.diagnostic.has_value()) continue;
    e.Sample("sandbox_node_generation_diagnostic",
             {{"generation", absl::StrCat(s.ref.generation)},
              {"code", std::string(DiagnosticCode(*s.diagnostic))}},
             1);
  }
  e.Family("sandbox_node_generation_role",
           "1 when the generation is Core's target or the serving one.", "gauge");
  for (const GenerationStatus& s : all) {
    const std::string gen = absl::StrCat(s.ref.generation);
    e.Sample("sandbox_node_generation_role", {{"generation", gen}, {"role", "target"}}, s.target);
    e.Sample("sandbox_node_generation_role", {{"generation", gen}, {"role", "serving"}}, s.serving);
  }
  e.Family("sandbox_node_preparation_bytes_done",
           "Bytes of the running preparation's current phase done (upload, import).", "gauge");
  for (const GenerationStatus& s : all) {
    if (!s.progress.has_value()) continue;
    e.Sample("sandbox_node_preparation_bytes_done",
             {{"generation", absl::StrCat(s.ref.generation)}},
             static_cast<double>(s.progress->bytes_done));
  }
  e.Family("sandbox_node_preparation_bytes_total",
           "Bytes of the running preparation's current phase in all.", "gauge");
  for (const GenerationStatus& s : all) {
    if (!s.progress.has_value()) continue;
    e.Sample("sandbox_node_preparation_bytes_total",
             {{"generation", absl::StrCat(s.ref.generation)}},
             static_cast<double>(s.progress->bytes_total));
  }
  e.Family("sandbox_node_generation_references",
           "What keeps a generation from collection: requests queued or running on it, native "
           "helpers holding its lease.",
           "gauge");
  for (const GenerationStatus& s : all) {
    e.Sample("sandbox_node_generation_references",
             {{"generation", absl::StrCat(s.ref.generation)}, {"kind", "requests"}},
             static_cast<double>(q.CallsOn(s.ref.generation)));
  }
  // Native helpers live per generation (each holds its lease), from privhelper's latest probe;
  // only for generations the node knows.
  if (probe.has_value() && probe->figures.has_value()) {
    for (const auto& [gen, n] : probe->figures->helpers_by_generation) {
      const bool known =
          std::any_of(all.begin(), all.end(),
                      [gen = gen](const GenerationStatus& s) { return s.ref.generation == gen; });
      if (!known) continue;
      e.Sample("sandbox_node_generation_references",
               {{"generation", absl::StrCat(gen)}, {"kind", "native_helpers"}},
               static_cast<double>(n));
    }
  }
}

void Provider(Exposition& e, const std::optional<ProbeOutcome>& probe) {
  e.Family("sandbox_node_provider_ready",
           "1 when privhelper's latest probe found the provider ready.", "gauge");
  e.Sample("sandbox_node_provider_ready", {}, probe.has_value() && probe->ready);
  e.Family("sandbox_node_provider_diagnostic",
           "1 while the provider is not ready, labelled with the probe's diagnostic code.",
           "gauge");
  if (probe.has_value() && !probe->ready) {
    e.Sample("sandbox_node_provider_diagnostic",
             {{"code", std::string(DiagnosticCode(probe->diagnostic))}}, 1);
  }
  e.Family("sandbox_node_sandboxes",
           "Sandboxes by state as privhelper's latest probe counted them.", "gauge");
  if (probe.has_value() && probe->sandboxes.has_value()) {
    e.Sample("sandbox_node_sandboxes", {{"state", "active"}},
             static_cast<double>(probe->sandboxes->active));
    e.Sample("sandbox_node_sandboxes", {{"state", "retained"}},
             static_cast<double>(probe->sandboxes->retained));
  }
  e.Family("sandbox_node_sandboxes_limit", "privhelper's bounds: max_active and max_retained.",
           "gauge");
  if (probe.has_value()) {
    e.Sample("sandbox_node_sandboxes_limit", {{"state", "active"}},
             static_cast<double>(probe->limits.max_active));
    e.Sample("sandbox_node_sandboxes_limit", {{"state", "retained"}},
             static_cast<double>(probe->limits.max_retained));
  }
}

// privhelper's own figures as its latest probe reported them (the agent asks nothing more of
// it at scrape time).
void Privhelper(Exposition& e, const std::optional<ProbeOutcome>& probe) {
  const PrivhelperFigures* f =
      probe.has_value() && probe->figures.has_value() ? &*probe->figures : nullptr;
  e.Family("sandbox_node_privhelper_helpers_live", "Native helpers privhelper runs now.", "gauge");
  if (f) e.Sample("sandbox_node_privhelper_helpers_live", {}, static_cast<double>(f->helpers_live));
  e.Family("sandbox_node_privhelper_refusals_total",
           "Execute calls privhelper refused before any native I/O, by refusal kind.", "counter");
  if (f) {
    for (const auto& [kind, n] : f->refusals) {
      e.Sample("sandbox_node_privhelper_refusals_total", {{"refusal", std::string(kind)}},
               static_cast<double>(n));
    }
  }
  e.Family("sandbox_node_privhelper_violations_total",
           "Peers privhelper disconnected for breaking its permit table.", "counter");
  if (f)
    e.Sample("sandbox_node_privhelper_violations_total", {}, static_cast<double>(f->violations));
  e.Family("sandbox_node_privhelper_probe_duration_seconds",
           "How long privhelper's latest provider probe took.", "gauge");
  if (f) e.Sample("sandbox_node_privhelper_probe_duration_seconds", {}, f->probe_seconds);
}

void Process(Exposition& e, const std::optional<ProbeOutcome>& probe) {
  absl::StatusOr<metrics::ProcessFigures> own = metrics::ReadProcessFigures();
  const PrivhelperFigures* ph =
      probe.has_value() && probe->figures.has_value() ? &*probe->figures : nullptr;
  e.Family("sandbox_node_process_resident_memory_bytes", "Resident memory of a node process.",
           "gauge");
  if (own.ok()) {
    e.Sample("sandbox_node_process_resident_memory_bytes", {{"process", "agent"}},
             static_cast<double>(own->resident_bytes));
  }
  if (ph) {
    e.Sample("sandbox_node_process_resident_memory_bytes", {{"process", "privhelper"}},
             static_cast<double>(ph->resident_bytes));
  }
  e.Family("sandbox_node_process_cpu_seconds_total",
           "CPU time (user and system) of a node process.", "counter");
  if (own.ok())
    e.Sample("sandbox_node_process_cpu_seconds_total", {{"process", "agent"}}, own->cpu_seconds);
  if (ph)
    e.Sample("sandbox_node_process_cpu_seconds_total", {{"process", "privhelper"}},
             ph->cpu_seconds);
  e.Family("sandbox_node_process_open_fds", "Open file descriptors of a node process.", "gauge");
  if (own.ok()) {
    e.Sample("sandbox_node_process_open_fds", {{"process", "agent"}},
             static_cast<double>(own->open_fds));
  }
  if (ph) {
    e.Sample("sandbox_node_process_open_fds", {{"process", "privhelper"}},
             static_cast<double>(ph->open_fds));
  }
}

}  // namespace

void AddNodeCollectors(AgentMetrics& metrics, NodeView v) {
  metrics.AddCollector([v](Exposition& e) {
    Requests(e, *v.queue);
    ConnectionFamilies(e, v.connection ? v.connection() : nullptr, *v.owner_epoch);
    Generations(e, *v.generations, *v.queue, *v.last_probe);
    Provider(e, *v.last_probe);
    Privhelper(e, *v.last_probe);
    Process(e, *v.last_probe);
  });
}

}  // namespace sn::agent

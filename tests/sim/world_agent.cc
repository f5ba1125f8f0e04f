// The agent's processes: a start wired as agent/cli/run.cc wires it, kills, crashes with power loss, and the checks on its durable state.
#include <algorithm>

#include "tests/sim/world_internal.h"

namespace sn::sim::internal {

std::optional<std::string> World::LiveConnectionId() const {
  if (agent_ == nullptr || agent_->conn == nullptr ||
      agent_->conn->state() != Connection::State::kLive || !agent_->conn->live()) {
    return std::nullopt;
  }
  return agent_->conn->live()->connection_id;
}

void World::StartAgent() {
  ++incarnation_;
  crash_armed_ = false;
  if (disk_full_) ++counters_["agent_starts_on_full_disk"];
  Event(absl::StrCat("agent starts, incarnation ", incarnation_));
  agent_ = std::make_unique<Agent>();
  Agent& a = *agent_;
  a.health.report.health.observed_at = "2026-12-06T12:00:00Z";
  a.health.report.health.host.cpu_cores = 2;
  a.health.report.health.host.load_1m = "0.25";
  a.health.report.health.host.memory_total_bytes = 1 << 30;
  a.health.report.health.host.memory_available_bytes = 1 << 29;
  a.health.report.backend_fingerprint = "sim";
  if (options_.bug == Bug::kVolatileOwnerEpoch) {
    a.epochs = std::make_unique<VolatileEpochStore>();
  } else {
    a.epochs = std::make_unique<agent::FileEpochStore>(kEpochPath, &fs_);
  }
  a.pins = std::make_unique<agent::FilePinStore>(kPinsPath, &fs_);
  agent::GenerationManagerOptions mo;
  mo.generation_management = true;
  mo.enrolled = {1, Digest(1)};
  a.manager = std::make_unique<agent::GenerationManager>(
      mo, &wall_, &clock_, a.pins.get(), &a.preparer,
      [](const GenerationRef&) -> std::optional<std::set<std::string>> {
        return std::set<std::string>{"busybox"};
      });
  absl::Status st = a.manager->Start();
  if (!st.ok() && !fs_.crashed()) {
    Violate(kRestart, absl::StrCat("generation manager: ", st.ToString()));
  }
  // Small segments, so the simulation crashes the journal across its rotations too.
  a.record = std::make_unique<agent::OperationRecord>(
      kOperationsDir, &wall_, agent::kMaxOperationRecords, &fs_, /*segment_bytes=*/16 << 10);
  if (options_.bug != Bug::kSkipRecordRecovery) {
    st = a.record->Recover();
    if (!st.ok() && !fs_.crashed()) {
      Violate(kRestart, absl::StrCat("operation record: ", st.ToString()));
    }
  }
  a.record->PruneEvery(&clock_, agent::kRecordPruneInterval);
  agent::RequestQueueOptions qo;
  qo.gate = a.manager.get();
  a.queue =
      std::make_unique<agent::RequestQueue>(qo, &wall_, &clock_, a.record.get(), &executor_);
  agent::RequestQueue* queue = a.queue.get();
  a.retention = std::make_unique<agent::RetentionDecisions>(
      &wall_, a.manager.get(), [queue](int64_t g) { return queue->CallsOn(g); }, &collector_,
      [this](const std::vector<agent::RetentionStatus>& s) {
        (void)agent::WriteRetentionRecord(kRetentionPath, s, wall_.Now(), &fs_);
      });
  agent::ConnectionParams p;
  p.node_id = kNodeId;
  p.installation_id = kInstallationId;
  p.provider = "docker";
  p.deployment_generation = 1;
  p.specification_digest = Digest(1);
  p.limits = agent::ProviderLimits{16, 64};
  p.generation_management = true;
  p.generations = a.manager.get();
  if (options_.bug == Bug::kRetentionNotToldOfDisconnect) {
    a.forgetful = std::make_unique<ForgetfulRetention>(a.retention.get());
    p.retention = a.forgetful.get();
  } else {
    p.retention = a.retention.get();
  }
  p.events.live = [this](int64_t epoch) { OnLive(epoch); };
  a.conn = std::make_unique<Connection>(
      p, &transport_, &wall_, &clock_, &a.health, a.epochs.get(),
      agent::Backoff([this] { return rng_.Uniform(); }), a.queue.get(), [](absl::Status) {});
  a.manager->OnGenerationReports(Reports());
  if (!fs_.crashed()) a.conn->Start();
}

void World::StopAgent(bool power_loss) {
  if (current_ != 0) {
    Wire& w = wires_.at(current_);
    w.core_open = false;
    w.agent_open = false;
    current_ = 0;
  }
  transport_.Detach();
  agent_.reset();
  if (power_loss) {
    FaultFs::CrashOptions co;
    co.persisted_metadata_ops = rng_.Below(fs_.PendingDirOps() + 1);
    co.data = static_cast<FaultFs::UnsyncedData>(rng_.Below(3));
    fs_.Crash(co);
  } else {
    fs_.KillProcess();
  }
  crash_armed_ = false;
  Post(rng_.Millis(100, 5000), [this] {
    if (agent_ == nullptr) StartAgent();
  });
}

void World::OnLive(int64_t epoch) {
  ++counters_["connections_live"];
  Event(absl::StrCat("agent live, epoch ", epoch));
  if (epoch < max_live_epoch_) {
    Violate(kEpochs, absl::StrCat("the agent went live with owner epoch ", epoch,
                                  " after having been live with ", max_live_epoch_));
  }
  max_live_epoch_ = std::max(max_live_epoch_, epoch);
}

std::vector<agent::GenerationReport> World::Reports() const {
  std::vector<agent::GenerationReport> out;
  for (const auto& [g, s] : held_) out.push_back({g, Digest(g), s, std::nullopt});
  return out;
}

void World::Probe() {
  if (agent_ != nullptr && !AgentDead()) agent_->manager->OnGenerationReports(Reports());
  Post(absl::Seconds(30), [this] { Probe(); });
}

void World::CheckRecords() {
  if (dirty_.empty()) return;
  dirty_.clear();
  if (agent_ == nullptr || agent_->record == nullptr) return;
  // The journal (agent/requests/operation_record.h) is appended to only in its newest
  // segment: search what was written since the last check, from the segment searched last
  // (a power loss may have taken newer ones back) up to the newest.
  const uint64_t newest = agent_->record->newest_segment();
  if (newest == 0) return;
  if (checked_segment_ == 0 || checked_segment_ > newest) {
    checked_segment_ = newest;
    checked_bytes_ = 0;
  }
  for (uint64_t seq = checked_segment_; seq <= newest; ++seq) {
    const std::string name = agent::JournalSegmentName(seq);
    absl::StatusOr<std::string> text = fs_.Contents(absl::StrCat(kOperationsDir, "/", name));
    if (!text.ok()) continue;
    const size_t from =
        seq == checked_segment_ && checked_bytes_ <= text->size() ? checked_bytes_ : 0;
    const size_t at = text->find("SECRET", from);
    if (at != std::string::npos) {
      Violate(kNoPayload, absl::StrCat("the record's ", name, " holds ",
                                       text->substr(at > 200 ? at - 200 : 0, 400)));
    }
    if (seq == newest) checked_bytes_ = text->size() >= 6 ? text->size() - 5 : 0;
  }
  checked_segment_ = newest;
}

}  // namespace sn::sim::internal

#include "privhelper/rpc/preparation.h"

#include <string>

#include "common/log.h"
#include "privhelper/store/prep_failure.h"
#include "proto/execute_stream.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;

// The generation's state after a step (UNSPECIFIED when privhelper has no record of it).
pb::GenerationState StateOf(const store::GenerationStore& g, int64_t generation) {
  for (const store::GenerationStatus& s : g.Statuses()) {
    if (s.generation == generation) return ToProto(s.state);
  }
  return pb::GENERATION_STATE_UNSPECIFIED;
}

pb::PreparationResult Result(const PreparationContext& ctx, int64_t generation,
                             const absl::Status& status, std::string_view step) {
  pb::PreparationResult r;
  if (!status.ok()) {
    const Diagnostic d = store::PrepDiagnosticOf(status);
    r.set_diagnostic(DiagnosticToProto(d));
    LogWarning("preparation step failed", {{"step", step},
                                           {"generation", generation},
                                           {"diagnostic", DiagnosticCode(d)},
                                           {"error", std::string(status.message())}});
  }
  if (generation > 0) r.set_state(StateOf(*ctx.generations, generation));
  return r;
}

}  // namespace

pb::GenerationState ToProto(store::GenerationState s) {
  switch (s) {
    case store::GenerationState::kPreparing: return pb::GENERATION_STATE_PREPARING;
    case store::GenerationState::kReady: return pb::GENERATION_STATE_READY;
    case store::GenerationState::kFailed: return pb::GENERATION_STATE_FAILED;
    case store::GenerationState::kCollecting: return pb::GENERATION_STATE_COLLECTING;
    case store::GenerationState::kDropped: return pb::GENERATION_STATE_DROPPED;
    case store::GenerationState::kNeedsRepair: return pb::GENERATION_STATE_NEEDS_REPAIR;
  }
  return pb::GENERATION_STATE_UNSPECIFIED;
}

pb::Diagnostic DiagnosticToProto(Diagnostic d) {
  // The proto enum is the .def order shifted by one (0 is DIAGNOSTIC_UNSPECIFIED).
  return static_cast<pb::Diagnostic>(static_cast<int>(d) + 1);
}

pb::PreparationResult AdoptRelease(const PreparationContext& ctx, const pb::ReleaseMetadata& m) {
  absl::StatusOr<release::VerifiedRelease> v =
      ctx.releases->Adopt(m.source(), m.manifest(), m.signature(), m.sha256sums());
  if (v.ok()) LogInfo("release adopted", {{"source", m.source()}});
  return Result(ctx, 0, v.status(), "adopt release");
}

pb::PreparationResult BeginPreparation(const PreparationContext& ctx,
                                       const pb::BeginPreparationRequest& r) {
  absl::StatusOr<std::vector<std::string>> missing =
      ctx.generations->Begin(r.generation(), r.specification(), r.specification_digest());
  pb::PreparationResult out = Result(ctx, r.generation(), missing.status(), "begin");
  if (missing.ok()) {
    for (const std::string& name : *missing) out.add_missing_artifacts(name);
    absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> held =
        ctx.generations->HeldPartials(r.generation(), *missing);
    if (!held.ok()) return Result(ctx, r.generation(), held.status(), "begin");
    for (const auto& [name, bytes] : *held) {
      pb::PartialArtifact* p = out.add_partial_artifacts();
      p->set_name(name);
      p->set_held_bytes(bytes);
    }
  }
  return out;
}

pb::PreparationResult PutArtifact(const PreparationContext& ctx,
                                  const std::function<bool(pb::ArtifactUpload*)>& next,
                                  const std::function<bool()>& cancelled) {
  pb::ArtifactUpload m;
  if (!next(&m) || !m.has_header()) {
    return Result(ctx, 0,
                  store::PrepFailure(absl::StatusCode::kInvalidArgument,
                                     Diagnostic::kConfigurationInvalid,
                                     "the upload does not start with its header"),
                  "put artifact");
  }
  const int64_t generation = m.header().generation();
  const std::string name = m.header().name();
  const uint64_t offset = m.header().offset();
  absl::StatusOr<std::unique_ptr<store::ReleaseStore::Writer>> w =
      ctx.generations->WriteArtifact(generation, name, offset, ctx.importer);
  if (!w.ok()) return Result(ctx, generation, w.status(), "put artifact");
  uint64_t bytes = 0;
  bool suspended = false;
  while (next(&m)) {
    if (suspended) {
      return Result(ctx, generation,
                    store::PrepFailure(absl::StatusCode::kInvalidArgument,
                                       Diagnostic::kConfigurationInvalid,
                                       "a message after an upload's suspend"),
                    "put artifact");
    }
    if (m.part_case() == pb::ArtifactUpload::kSuspend) {
      suspended = true;
      continue;
    }
    if (!m.has_data() || m.data().size() > kMaxPayloadChunkBytes) {
      return Result(ctx, generation,
                    store::PrepFailure(absl::StatusCode::kInvalidArgument,
                                       Diagnostic::kConfigurationInvalid,
                                       "an upload message is not a bounded data chunk"),
                    "put artifact");
    }
    if (absl::Status s = (*w)->Append(m.data()); !s.ok()) {
      return Result(ctx, generation, s, "put artifact");
    }
    bytes += m.data().size();
  }
  if (suspended || (cancelled && cancelled())) {
    // Suspended by the client, or no half-close: the Writer keeps what it holds as the
    // artifact's partial (a later PutArtifact resumes it at that offset); nothing is published.
    LogInfo(suspended ? "artifact upload suspended; its bytes are kept as a partial"
                      : "artifact upload ended without its end; its bytes are kept as a partial",
            {{"generation", generation}, {"artifact", name}, {"offset", offset},
             {"bytes", static_cast<uint64_t>(bytes)}});
    if (suspended) return Result(ctx, generation, absl::OkStatus(), "put artifact");
    return Result(ctx, generation, absl::CancelledError("the upload was cancelled"),
                  "put artifact");
  }
  absl::Status s = (*w)->Commit();
  if (s.ok()) {
    LogInfo("artifact stored", {{"generation", generation}, {"artifact", name},
                                {"offset", offset}, {"bytes", static_cast<uint64_t>(bytes)}});
  }
  return Result(ctx, generation, s, "put artifact");
}

pb::PreparationResult FinishPreparation(const PreparationContext& ctx,
                                        const pb::FinishPreparationRequest& r) {
  absl::Status s = ctx.generations->Finish(r.generation(), *ctx.importer, ctx.provider_ready);
  return Result(ctx, r.generation(), s, "finish");
}

void ToProto(const store::GenerationStatus& s, pb::GenerationReport* g) {
  g->set_generation(s.generation);
  g->set_specification_digest(s.specification_digest);
  g->set_state(ToProto(s.state));
  if (s.diagnostic.has_value()) g->set_diagnostic(DiagnosticToProto(*s.diagnostic));
}

void AddGenerationReports(const store::GenerationStore& generations, pb::ProbeResponse* out) {
  for (const store::GenerationStatus& s : generations.Statuses()) {
    if (out->generations_size() >= kMaxReportedGenerations) {
      out->set_generations_truncated(true);
      break;
    }
    ToProto(s, out->add_generations());
  }
}

}  // namespace sn::privhelper

#include "privhelper/rpc/retirement.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/wire/validate.h"
#include "privhelper/rpc/preparation.h"
#include "privhelper/rpc/proc_locks.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;

constexpr size_t kMaxReasonBytes = 512;

std::string Bounded(std::string_view s) {
  return std::string(s.substr(0, std::min(s.size(), kMaxReasonBytes)));
}

pb::GenerationState StateOf(const store::GenerationStore& g, int64_t generation) {
  for (const store::GenerationStatus& s : g.Statuses()) {
    if (s.generation == generation) return ToProto(s.state);
  }
  return pb::GENERATION_STATE_UNSPECIFIED;
}

}  // namespace

pb::CollectGenerationResult CollectGeneration(const RetirementContext& ctx,
                                              const pb::CollectGenerationRequest& r,
                                              const std::function<bool()>& cancelled) {
  pb::CollectGenerationResult out;
  const int64_t g = r.generation();
  if (g <= 0 || !wire::IsDigest(r.specification_digest())) {
    out.set_outcome(pb::COLLECT_OUTCOME_REFUSED);
    out.set_diagnostic(DiagnosticToProto(Diagnostic::kConfigurationInvalid));
    out.set_reason("generation must be positive and specification_digest a digest");
    return out;
  }
  bool marked = false;
  store::CollectHooks hooks;
  // Once the records admit the collection (and never before): an idle helper of the
  // generation is stopped; it counts until reaped.
  hooks.admitted = [&] {
    if (ctx.helpers != nullptr) ctx.helpers->RetireIfIdle(g);
  };
  hooks.unreferenced = [&]() -> absl::Status {
    if (cancelled()) return absl::CancelledError("the caller left");
    if (int calls = ctx.refs->BeginCollect(g); calls > 0) {
      return absl::UnavailableError(absl::StrCat(calls, " Execute call(s) in flight"));
    }
    marked = true;
    // A create of the generation that may still land (sandbox_fence.h) could still make a
    // native object of it: collection waits for its end.
    if (ctx.fence != nullptr && ctx.fence->HoldsGeneration(g)) {
      return absl::UnavailableError("a create of the generation may still land (sandbox fence)");
    }
    if (ctx.helpers != nullptr) {
      if (std::vector<pid_t> pids = ctx.helpers->live_pids(g); !pids.empty()) {
        return absl::UnavailableError(
            absl::StrCat("native helper pid ", absl::StrJoin(pids, ","), " not yet reaped"));
      }
    }
    // The provider's own objects of the generation (the microVM provider: its VMs).
    if (ctx.provider.in_use) return ctx.provider.in_use(g);
    return absl::OkStatus();
  };
  hooks.native_cleanup = [&](const std::vector<std::string>& images,
                             const std::vector<store::PlannedArtifact>& files) -> absl::Status {
    if (absl::Status s = ctx.importer->ForgetImages(images); !s.ok()) return s;
    return ctx.provider.forget_files ? ctx.provider.forget_files(files) : absl::OkStatus();
  };
  absl::Status s = ctx.generations->Collect(g, r.specification_digest(), hooks);
  if (marked) ctx.refs->EndCollect(g);
  if (s.ok()) {
    out.set_outcome(pb::COLLECT_OUTCOME_DROPPED);
  } else if (absl::IsNotFound(s)) {
    out.set_outcome(pb::COLLECT_OUTCOME_UNKNOWN);
  } else if (absl::IsUnavailable(s) || absl::IsCancelled(s)) {
    out.set_outcome(pb::COLLECT_OUTCOME_HELD);
  } else if (absl::IsFailedPrecondition(s) || absl::IsInvalidArgument(s)) {
    out.set_outcome(pb::COLLECT_OUTCOME_REFUSED);
    out.set_diagnostic(DiagnosticToProto(store::PrepDiagnosticOf(s)));
  } else {
    out.set_outcome(pb::COLLECT_OUTCOME_FAILED);
  }
  if (!s.ok()) out.set_reason(Bounded(std::string_view(s.message().data(), s.message().size())));
  out.set_state(StateOf(*ctx.generations, g));
  LogInfo("collection", {{"generation", g},
                         {"outcome", pb::CollectOutcome_Name(out.outcome())},
                         {"reason", out.reason()}});
  return out;
}

pb::ListGenerationsResponse ListGenerations(const RetirementContext& ctx,
                                            bool preparation_running) {
  pb::ListGenerationsResponse out;
  out.set_preparation_running(preparation_running);
  out.set_collection_running(ctx.refs->collecting());
  const LockHolders holders = ReadProcLocks();
  for (const store::GenerationDetail& d : ctx.generations->Details()) {
    if (out.generations_size() >= kMaxReportedGenerations) {
      out.set_truncated(true);
      break;
    }
    pb::GenerationDetail* o = out.add_generations();
    ToProto(d.status, o->mutable_report());
    const int64_t g = d.status.generation;
    if (d.progress.has_value()) {
      o->set_has_progress(true);
      o->set_artifacts_stored(d.progress->artifacts_stored);
      o->set_artifacts_total(d.progress->artifacts_total);
      o->set_bytes_stored(d.progress->bytes_stored);
      o->set_bytes_total(d.progress->bytes_total);
      o->set_import_started(d.progress->import_started);
    }
    if (ctx.helpers != nullptr) {
      for (pid_t pid : ctx.helpers->live_pids(g)) o->add_helper_pids(pid);
    }
    o->set_calls_in_flight(ctx.refs->calls(g));
    if (d.lease_dev_ino.has_value()) {
      if (auto it = holders.find(*d.lease_dev_ino); it != holders.end()) {
        for (pid_t pid : it->second) o->add_lease_holders(pid);
      }
    }
    o->set_collect_files_left(d.collect_files_left);
    o->set_native_done(d.native_done);
    o->set_last_collection_error(Bounded(d.last_collection_error));
  }
  return out;
}

}  // namespace sn::privhelper

#include "agent/generations/prepare.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/state/specification.h"
#include "common/error_cause.h"
#include "common/log.h"
#include "common/release/failure.h"
#include "common/release/layout.h"
#include "common/release/verify.h"
#include "common/wire/limits.h"

namespace sn::agent {
namespace {

constexpr char kConfigurationPath[] = "/api/v1/sandbox-node/configuration";
// Progress is reported at most once per this many streamed bytes (and at each artifact's end).
constexpr int64_t kProgressStepBytes = int64_t{1} << 20;

std::string ToStd(absl::string_view s) { return std::string(s.data(), s.size()); }

class Attempt {
 public:
  Attempt(const PreparationContext& ctx, const GenerationRef& ref, CancelToken* cancel,
          const ProgressFn& progress)
      : ctx_(ctx), ref_(ref), cancel_(cancel), progress_(progress) {}

  PreparationOutcome Run();

 private:
  // The attempt ends with `d`; `why` goes to the local log only.
  PreparationOutcome Fail(Diagnostic d, std::string_view step, std::string_view why,
                          std::optional<HeldState> state = std::nullopt) {
    if (cancel_ != nullptr && cancel_->cancelled()) d = Diagnostic::kPreparationCancelled;
    LogWarning("preparation failed", {{"generation", ref_.generation},
                                      {"step", step},
                                      {"diagnostic", DiagnosticCode(d)},
                                      {"error", why}});
    PreparationOutcome o;
    o.failure = d;
    o.state = state;
    return o;
  }
  // A failure whose typed cause decides the code (common/error_cause.h): transfer, checksum
  // and provenance are runtime_download_failed. A cancelled call is provider_unavailable (the
  // cancelled token wins over both, in Fail); any other untyped error is a bug
  // (ReportedDiagnostic: logged, provider_unavailable).
  PreparationOutcome FailTyped(std::string_view step, const absl::Status& st) {
    const Diagnostic d = absl::IsCancelled(st) && !CauseOf(st).has_value()
                             ? Diagnostic::kProviderUnavailable
                             : ReportedDiagnostic(st, "the agent's preparation");
    return Fail(d, step, ToStd(st.message()));
  }
  std::optional<PreparationOutcome> FromAnswer(std::string_view step, const StepAnswer& a) {
    if (!a.failure.has_value()) return std::nullopt;
    return Fail(*a.failure, step, "privhelper's answer (or its absence) ended the step", a.state);
  }
  bool Cancelled() const { return cancel_ != nullptr && cancel_->cancelled(); }
  void Report(std::string phase, std::string artifact = "") {
    progress_state_.phase = std::move(phase);
    progress_state_.artifact = std::move(artifact);
    if (progress_) progress_(progress_state_);
  }

  // Steps; each returns the outcome when the attempt ends there.
  std::optional<PreparationOutcome> FetchSpecification();
  std::optional<PreparationOutcome> FetchRelease();
  // One artifact privhelper lacks, of which it holds `held` bytes (0: none).
  std::optional<PreparationOutcome> Upload(const std::string& name, uint64_t held);
  // One download of it from Core into privhelper, from byte `offset` (a range request) or 0.
  struct Fetched {
    std::optional<PreparationOutcome> end;  // the attempt ends here
    bool resume_refused = false;  // a fetch from `offset` > 0 that a fetch from 0 may replace
    std::string why;
  };
  Fetched Fetch(const wire::RuntimeArtifact& entry, uint64_t offset);
  // One fetch of one artifact from Core into privhelper (Fetch's state and steps).
  struct ArtifactFetch {
    std::string name;
    uint64_t size = 0;
    uint64_t offset = 0;    // where the fetch asked to start
    uint64_t start = 0;     // where the body starts in the artifact
    uint64_t received = 0;  // body bytes
    bool upload_ended = false;
    std::string content_range;
    int64_t reported = 0;  // progress bytes last reported
    // The stream to privhelper opens only once Core's answer looks like the declared artifact
    // (or the declared rest of it).
    std::unique_ptr<ArtifactUpload> upload;
    Fetched out;
  };
  absl::Status OnFetchHead(ArtifactFetch& f, int status, std::optional<uint64_t> length);
  absl::Status OnFetchData(ArtifactFetch& f, std::string_view bytes);
  Fetched EndFetch(ArtifactFetch& f, absl::Status st);
  // privhelper's answer at the end; a resumed file it refused as a whole is fetched again.
  Fetched Answered(ArtifactFetch& f, const StepAnswer& a);
  absl::StatusOr<std::string> GetMetadata(std::string_view name, size_t max_bytes);

  const PreparationContext& ctx_;
  GenerationRef ref_;
  CancelToken* cancel_;
  const ProgressFn& progress_;
  PreparationProgress progress_state_;
  std::optional<VerifiedSpecification> spec_;
  ReleaseFiles files_;
  std::optional<release::VerifiedRelease> release_;
};

std::optional<PreparationOutcome> Attempt::FetchSpecification() {
  Report("specification");
  absl::StatusOr<HttpResult> r =
      ctx_.core->Get(ConfigurationTarget(ref_.generation), true, wire::kMaxHttpBodyBytes, cancel_);
  if (!r.ok() && absl::IsResourceExhausted(r.status())) {
    return Fail(Diagnostic::kConfigurationInvalid, "specification",
                "the specification exceeds the §6 body limit");
  }
  if (!r.ok()) return FailTyped("specification", release::TransferFailure(ToStd(r.status().message())));
  if (r->status != 200) {
    return FailTyped("specification",
                     release::TransferFailure(absl::StrCat("the configuration route answered HTTP ",
                                                           r->status)));
  }
  absl::StatusOr<VerifiedSpecification> spec = VerifySpecificationBytes(
      std::move(r->body), ref_.generation, ref_.specification_digest, ctx_.provider);
  if (!spec.ok()) {
    return Fail(Diagnostic::kConfigurationInvalid, "specification",
                ToStd(spec.status().message()));
  }
  spec_ = *std::move(spec);
  return std::nullopt;
}

absl::StatusOr<std::string> Attempt::GetMetadata(std::string_view name, size_t max_bytes) {
  const std::string target = ReleaseTarget(files_.source, name);
  absl::StatusOr<HttpResult> r = ctx_.core->Get(target, false, max_bytes, cancel_);
  if (!r.ok() && absl::IsResourceExhausted(r.status())) {
    return release::ProvenanceFailure(absl::StrCat(target, " exceeds its size limit"));
  }
  if (!r.ok()) return release::TransferFailure(absl::StrCat(target, ": ", r.status().message()));
  if (r->status != 200) {
    return release::TransferFailure(absl::StrCat(target, " answered HTTP ", r->status));
  }
  return std::move(r->body);
}

std::optional<PreparationOutcome> Attempt::FetchRelease() {
  Report("release");
  files_.source = spec_->document.runtime_source;
  absl::StatusOr<std::string> manifest =
      GetMetadata(release::kManifestFileName, release::kMaxManifestBytes);
  if (!manifest.ok()) return FailTyped("release", manifest.status());
  absl::StatusOr<std::string> sig =
      GetMetadata(release::kSignatureFileName, release::kMaxSignatureFileBytes);
  if (!sig.ok()) return FailTyped("release", sig.status());
  absl::StatusOr<std::string> sums = GetMetadata(release::kSumsFileName, release::kMaxSumsBytes);
  if (!sums.ok()) return FailTyped("release", sums.status());
  absl::StatusOr<release::VerifiedRelease> verified =
      release::VerifyRelease(files_.source, *manifest, *sig, *sums, *ctx_.release_key);
  if (!verified.ok()) return FailTyped("release", verified.status());
  absl::Status agrees =
      release::CheckSpecificationAgainstManifest(spec_->document, verified->manifest());
  if (!agrees.ok()) {
    return Fail(Diagnostic::kConfigurationInvalid, "release", ToStd(agrees.message()));
  }
  files_.manifest = *std::move(manifest);
  files_.signature = *std::move(sig);
  files_.sha256sums = *std::move(sums);
  release_ = *std::move(verified);
  return std::nullopt;
}

std::optional<PreparationOutcome> Attempt::Upload(const std::string& name, uint64_t held) {
  // Only artifacts the verified specification names, described by the verified manifest.
  bool named = false;
  for (const wire::RuntimeArtifact& a : spec_->document.artifacts) named |= a.name == name;
  const wire::RuntimeArtifact* entry = release_->Find(name);
  if (!named || entry == nullptr) {
    return Fail(Diagnostic::kProviderUnavailable, "upload",
                absl::StrCat("privhelper asked for an artifact the specification does not name: ",
                             name));
  }
  Report("upload", name);
  // privhelper holds a prefix of it: ask Core for the rest. When that is refused (Core's
  // answer is not exactly that range, or the whole file then fails privhelper's check), the
  // artifact is fetched once more from byte 0 in this attempt (docs/protocol.md 18b).
  if (held > 0 && held < static_cast<uint64_t>(entry->size)) {
    const int64_t done = progress_state_.bytes_done;
    Fetched resumed = Fetch(*entry, held);
    if (!resumed.resume_refused) return resumed.end;
    LogWarning("a resumed download was refused; fetching the artifact again from byte 0",
               {{"generation", ref_.generation}, {"artifact", name},
                {"held_bytes", held}, {"error", resumed.why}});
    progress_state_.bytes_done = done;
  }
  return Fetch(*entry, 0).end;
}

// The agent counts the bytes (an excess is refused before it is sent); the SHA-256 of the
// whole file is privhelper's check, which it makes anyway before it publishes a byte or lets
// the overlapped image load see the end (docs/protocol.md 17d): hashing here as well would cost
// the stream's CPU twice.
Attempt::Fetched Attempt::Fetch(const wire::RuntimeArtifact& entry, uint64_t offset) {
  ArtifactFetch f;
  f.name = entry.name;
  f.size = static_cast<uint64_t>(entry.size);
  f.offset = offset;
  f.reported = progress_state_.bytes_done;
  HttpStreamSink sink;
  sink.on_content_range = [&f](std::string_view cr) { f.content_range = std::string(cr); };
  sink.on_head = [this, &f](int status, std::optional<uint64_t> length) {
    return OnFetchHead(f, status, length);
  };
  sink.on_data = [this, &f](std::string_view bytes) { return OnFetchData(f, bytes); };
  absl::Status st =
      ctx_.core->GetStream(ReleaseTarget(files_.source, f.name), offset, sink, cancel_);
  return EndFetch(f, std::move(st));
}

absl::Status Attempt::OnFetchHead(ArtifactFetch& f, int status,
                                  std::optional<uint64_t> length) {
  if (f.offset > 0 && status == 206) {
    const std::string exact = absl::StrCat("bytes ", f.offset, "-", f.size - 1, "/", f.size);
    if (f.content_range != exact || (length.has_value() && *length != f.size - f.offset)) {
      f.out.resume_refused = true;
      return release::TransferFailure(absl::StrCat(
          f.name, ": Core answered the range request with Content-Range \"", f.content_range,
          "\", not \"", exact, "\""));
    }
    f.start = f.offset;
  } else if (status != 200) {
    f.out.resume_refused = f.offset > 0;
    return release::TransferFailure(absl::StrCat(f.name, " answered HTTP ", status));
  } else if (f.offset > 0) {
    LogInfo("Core ignored the range request; the artifact is fetched from byte 0",
            {{"generation", ref_.generation}, {"artifact", f.name}});
  }
  if (length.has_value() && *length != f.size - f.start) {
    return release::ChecksumFailure(
        absl::StrCat(f.name, ": Content-Length differs from the manifest's size"));
  }
  f.upload = ctx_.privhelper->PutArtifact(ref_.generation, f.name, f.start, cancel_);
  progress_state_.bytes_done += static_cast<int64_t>(f.start);
  return absl::OkStatus();
}

absl::Status Attempt::OnFetchData(ArtifactFetch& f, std::string_view bytes) {
  // Refuses an excess before it is sent.
  if (bytes.size() > f.size - f.start - f.received) {
    return release::ChecksumFailure(
        absl::StrCat(f.name, ": more bytes than the manifest declares"));
  }
  f.received += bytes.size();
  if (!f.upload->Write(bytes)) {
    f.upload_ended = true;
    return absl::AbortedError("privhelper ended the upload early");
  }
  progress_state_.bytes_done += static_cast<int64_t>(bytes.size());
  if (progress_state_.bytes_done - f.reported >= kProgressStepBytes) {
    f.reported = progress_state_.bytes_done;
    if (progress_) progress_(progress_state_);
  }
  return absl::OkStatus();
}

Attempt::Fetched Attempt::Answered(ArtifactFetch& f, const StepAnswer& a) {
  if (f.start > 0 && a.failure == Diagnostic::kRuntimeDownloadFailed && !Cancelled()) {
    f.out.resume_refused = true;
    f.out.why = "privhelper refused the resumed file (its size or SHA-256)";
    return std::move(f.out);
  }
  f.out.end = FromAnswer("upload", a);
  return std::move(f.out);
}

Attempt::Fetched Attempt::EndFetch(ArtifactFetch& f, absl::Status st) {
  if (f.upload_ended) {
    StepAnswer a = f.upload->Finish();
    if (a.failure.has_value()) return Answered(f, a);
    f.out.end = Fail(Diagnostic::kProviderUnavailable, "upload",
                     "privhelper ended the upload without an answer");
    return std::move(f.out);
  }
  if (st.ok() && f.upload == nullptr) st = release::TransferFailure("no response head");
  if (st.ok() && f.start + f.received != f.size) {
    st = release::ChecksumFailure(absl::StrCat(f.name, ": fewer bytes than declared"));
  }
  if (!st.ok()) {
    if (f.upload != nullptr) {
      // A download that broke (not one the agent refused): privhelper keeps what was sent,
      // and the next attempt resumes from there.
      const bool broke = !Cancelled() && !absl::IsCancelled(st) &&
                         (!release::FailureClassOf(st).has_value() ||
                          *release::FailureClassOf(st) == release::FailureClass::kTransfer);
      if (broke) {
        (void)f.upload->Suspend();
      } else {
        f.upload->Abort();
      }
    }
    if (f.out.resume_refused && !Cancelled()) {
      f.out.why = std::string(st.message());
      return std::move(f.out);
    }
    f.out.resume_refused = false;
    if (!release::FailureClassOf(st).has_value() && !absl::IsCancelled(st)) {
      st = release::TransferFailure(absl::StrCat(f.name, ": ", st.message()));
    }
    f.out.end = FailTyped("upload", st);
    return std::move(f.out);
  }
  if (progress_) progress_(progress_state_);
  return Answered(f, f.upload->Finish());
}

PreparationOutcome Attempt::Run() {
  LogInfo("preparing generation", {{"generation", ref_.generation},
                                   {"specification_digest", ref_.specification_digest}});
  if (Cancelled()) return Fail(Diagnostic::kPreparationCancelled, "start", "cancelled");
  if (auto end = FetchSpecification()) return *end;
  if (Cancelled()) return Fail(Diagnostic::kPreparationCancelled, "specification", "cancelled");
  if (auto end = FetchRelease()) return *end;
  if (Cancelled()) return Fail(Diagnostic::kPreparationCancelled, "release", "cancelled");
  if (ctx_.store_specification) {
    absl::Status st = ctx_.store_specification(ref_.generation, spec_->bytes);
    if (!st.ok()) return Fail(Diagnostic::kProviderUnavailable, "store", ToStd(st.message()));
  }
  if (auto end = FromAnswer("adopt", ctx_.privhelper->AdoptRelease(files_, cancel_))) return *end;
  StepAnswer begun = ctx_.privhelper->BeginPreparation(ref_.generation, spec_->bytes,
                                                       ref_.specification_digest, cancel_);
  if (auto end = FromAnswer("begin", begun)) return *end;
  for (const std::string& name : begun.missing_artifacts) {
    if (const wire::RuntimeArtifact* a = release_->Find(name)) {
      progress_state_.bytes_total += a->size;
    }
  }
  for (const std::string& name : begun.missing_artifacts) {
    if (Cancelled()) return Fail(Diagnostic::kPreparationCancelled, "upload", "cancelled");
    auto held = begun.partial_artifacts.find(name);
    if (auto end = Upload(name, held == begun.partial_artifacts.end() ? 0 : held->second)) {
      return *end;
    }
  }
  if (Cancelled()) return Fail(Diagnostic::kPreparationCancelled, "upload", "cancelled");
  Report("import");
  StepAnswer finished = ctx_.privhelper->FinishPreparation(ref_.generation, cancel_);
  if (auto end = FromAnswer("finish", finished)) return *end;
  if (finished.state.has_value() && *finished.state != HeldState::kReady) {
    return Fail(Diagnostic::kProviderUnavailable, "finish",
                "privhelper finished the preparation without a ready generation", finished.state);
  }
  LogInfo("generation prepared", {{"generation", ref_.generation},
                                  {"specification_digest", ref_.specification_digest}});
  PreparationOutcome o;
  o.state = HeldState::kReady;
  o.images = spec_->images;
  return o;
}

}  // namespace

std::string ConfigurationTarget(int64_t generation) {
  return absl::StrCat(kConfigurationPath, "?generation=", generation);
}

std::string ReleaseTarget(const std::string& source, std::string_view name) {
  return absl::StrCat("/releases/", source, "/", absl::string_view(name.data(), name.size()));
}

PreparationOutcome RunPreparation(const PreparationContext& context, const GenerationRef& ref,
                                  CancelToken* cancel, const ProgressFn& progress) {
  return Attempt(context, ref, cancel, progress).Run();
}

}  // namespace sn::agent

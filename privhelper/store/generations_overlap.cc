// GenerationStore's overlapped image load (docs/protocol.md 17a-17d): which upload gets one,
// import_started made durable before its first byte, and whether Finish may take its result.
// The load itself is overlapped_load.h.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/overlapped_load.h"

namespace sn::privhelper::store {
namespace {

// How long a new overlapped load waits for the previous one to end.
constexpr absl::Duration kPreviousLoadWait = absl::Seconds(10);

}  // namespace

void GenerationStore::StopOverlappedLoad() {
  std::unique_ptr<OverlappedLoad> load;
  {
    absl::MutexLock lock(&overlap_mu_);
    load = std::move(overlapped_);
  }
  load.reset();  // cuts it unless committed, and joins
}

std::unique_ptr<OverlappedLoad> GenerationStore::TakeOverlappedLoad(int64_t generation,
                                                                    std::string_view artifact) {
  absl::MutexLock lock(&overlap_mu_);
  if (overlapped_ == nullptr || overlapped_->generation() != generation ||
      overlapped_->artifact() != artifact) {
    return nullptr;
  }
  return std::move(overlapped_);
}

absl::StatusOr<std::string> GenerationStore::StartOverlappedLoad(int64_t generation,
                                                 const PlannedArtifact& artifact,
                                                 ReleaseStore::Writer& writer,
                                                 ImageImporter& importer) {
  absl::MutexLock overlap_lock(&overlap_mu_);
  // One at a time. A load cut by its upload's end (a retried upload follows) ends as soon as
  // the engine asks for its next piece: waited for, briefly.
  if (overlapped_ != nullptr && !overlapped_->AwaitDone(kPreviousLoadWait)) {
    return "another overlapped load is still running";
  }
  // import_started durable before the first byte goes to the daemon (docs/formats.md).
  Plan plan;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(generation);
    if (it == entries_.end() || !it->second.plan.has_value()) return "the plan is gone";
    plan = *it->second.plan;
  }
  if (!plan.import_started) {
    plan.import_started = true;
    // A failed durable step fails the upload (the store's disk refuses writes).
    RETURN_IF_ERROR(PublishReplacing(fs_, dir_, PlanName(generation), EncodePlan(plan)));
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(generation);
    if (it != entries_.end() && it->second.plan.has_value()) it->second.plan->import_started = true;
  }
  auto load = std::make_unique<OverlappedLoad>(generation, artifact.name,
                                               static_cast<uint64_t>(artifact.size));
  if (absl::Status s = load->Attach(writer); !s.ok()) {
    return absl::StrCat("the store's temporary could not be opened for reading: ", s.ToString());
  }
  load->Start(importer);
  overlapped_ = std::move(load);  // the one it replaces had ended
  return "";
}

bool GenerationStore::OverlappedLoadCompleted(int64_t g, const std::string& source,
                                              const std::string& artifact) {
  std::unique_ptr<OverlappedLoad> load = TakeOverlappedLoad(g, artifact);
  if (load == nullptr) return false;
  if (!load->Wait().ok()) return false;  // logged by the load; Finish loads from the store
  // Only the very file published: the inode the load read is the one the name resolves to.
  absl::StatusOr<std::unique_ptr<ReadableFile>> published = releases_->OpenArtifact(source, artifact);
  if (!published.ok() || (*published)->info().dev != load->file().dev ||
      (*published)->info().ino != load->file().ino ||
      (*published)->info().birth_ns != load->file().birth_ns) {
    LogWarning("the overlapped load read another file than the one published; loading from "
               "the store", {{"generation", g}, {"artifact", artifact}});
    return false;
  }
  LogInfo("the image was loaded while it streamed; not loaded again",
          {{"generation", g}, {"artifact", artifact}});
  return true;
}

}  // namespace sn::privhelper::store

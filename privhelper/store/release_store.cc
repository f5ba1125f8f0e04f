#include "privhelper/store/release_store.h"

#include <algorithm>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/release/failure.h"
#include "common/release/layout.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper::store {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

uint32_t ArtifactMode(const wire::RuntimeArtifact& a) { return a.kind == "helper" ? 0500 : 0400; }

absl::Status Ownership(std::string_view what) {
  return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kOwnershipRefused, what);
}

// Records one metadata file write-once; an existing one must hold the same bytes.
absl::Status RecordOnce(Fs& fs, const Dir& dir, std::string_view name, std::string_view bytes,
                        size_t max, uint32_t owner) {
  absl::Status s = PublishOnce(fs, dir, name, bytes);
  if (!absl::IsAlreadyExists(s)) return s;
  ASSIGN_OR_RETURN(std::string existing, ReadPrivateRecord(fs, dir, name, max, owner));
  if (existing != bytes) {
    return release::ProvenanceFailure(absl::StrCat(
        "another release with this source is recorded (", AV(name), " differs)"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string PartialArtifactName(std::string_view name) {
  return absl::StrCat(".", AV(name), kPartialSuffix);
}

namespace {

class StoreWriter final : public ReleaseStore::Writer {
 public:
  StoreWriter(Fs& fs, Dir dir, std::string tmp, std::string name,
              std::unique_ptr<WritableFile> file, const wire::RuntimeArtifact& artifact,
              std::function<absl::Status()> check_existing,
              std::function<void(const FileInfo&)> on_published)
      : fs_(fs),
        dir_(std::move(dir)),
        tmp_(std::move(tmp)),
        name_(std::move(name)),
        file_(std::move(file)),
        size_(static_cast<uint64_t>(artifact.size)),
        verifier_(artifact),
        check_existing_(std::move(check_existing)),
        on_published_(std::move(on_published)) {}
  ~StoreWriter() override {
    if (observer_ != nullptr && !published_own_) observer_->Aborted();
    if (committed_) return;
    // Ended without Commit (the upload was cancelled or lost): what was written and passed the
    // check so far is kept as the artifact's partial, for a later PutArtifact to resume; not
    // made durable (a torn partial fails the whole-file check of the resumed upload).
    const bool keep = file_ != nullptr && !poisoned_ && written_ > 0 && written_ < size_;
    if (file_ != nullptr) (void)file_->Close();
    if (keep && fs_.RenameAt(dir_, tmp_, PartialArtifactName(name_), /*no_replace=*/false).ok()) {
      return;
    }
    (void)fs_.UnlinkAt(dir_, tmp_);
  }
  absl::StatusOr<std::unique_ptr<ReadableFile>> Observe(Observer* observer) override {
    if (file_ == nullptr || poisoned_) {
      return absl::FailedPreconditionError("a Writer is observed while it can still be written");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> reader, fs_.OpenReadAt(dir_, tmp_));
    observer_ = observer;
    // A resumed Writer already holds the partial's prefix: the reader starts at byte 0 of it.
    if (written_ > 0) observer_->Appended(written_);
    return reader;
  }
  absl::Status Append(std::string_view bytes) override {
    if (absl::Status s = verifier_.Update(bytes); !s.ok()) {
      poisoned_ = true;
      return s;
    }
    if (absl::Status s = file_->Append(bytes); !s.ok()) {
      poisoned_ = true;  // what reached the file is unknown: never kept
      return s;
    }
    written_ += bytes.size();
    if (observer_ != nullptr) observer_->Appended(written_);
    return absl::OkStatus();
  }
  absl::Status Commit() override {
    // All declared bytes that fail the digest are never kept as a partial (the whole file is
    // wrong, so the prefix may be); a short stream (a cancellation the server saw only as an
    // end) stays a partial.
    if (written_ == size_) poisoned_ = true;
    RETURN_IF_ERROR(verifier_.Finish());
    poisoned_ = true;
    // The temporary now holds exactly the verified bytes (privhelper's own, written only by
    // this Writer): an observer may read all of them while they are made durable.
    if (observer_ != nullptr) observer_->Verified();
    RETURN_IF_ERROR(file_->Sync());
    RETURN_IF_ERROR(file_->Close());
    file_.reset();
    absl::Status s = fs_.RenameAt(dir_, tmp_, name_, /*no_replace=*/true);
    if (absl::IsAlreadyExists(s)) {
      // Published meanwhile (an earlier attempt): it must be the same artifact.
      (void)fs_.UnlinkAt(dir_, tmp_);
      committed_ = true;
      RETURN_IF_ERROR(check_existing_());
      return fs_.SyncDir(dir_);
    }
    RETURN_IF_ERROR(s);
    committed_ = true;
    RETURN_IF_ERROR(fs_.SyncDir(dir_));
    published_own_ = true;
    if (observer_ != nullptr) observer_->Committed();
    // The published file, as the import will find it (ReleaseStore::CheckRecent). Not
    // remembered when it cannot be opened: the import then checks it in full.
    absl::StatusOr<std::unique_ptr<ReadableFile>> published = fs_.OpenReadAt(dir_, name_);
    if (published.ok()) on_published_((*published)->info());
    return DiscardStalePartial();
  }

  // Continues a partial: its bytes, read from privhelper's own file, are hashed and copied
  // into the temporary (exactly `held` of them), then the partial is removed (this Writer now
  // holds them, and keeps them again if it ends without Commit).
  absl::Status Resume(uint64_t held) {
    const std::string partial = PartialArtifactName(name_);
    ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> f, fs_.OpenReadAt(dir_, partial));
    std::string buf(kReadChunk, '\0');
    uint64_t copied = 0;
    while (copied < held) {
      ASSIGN_OR_RETURN(size_t n, f->Read(buf.data(), std::min<uint64_t>(buf.size(), held - copied)));
      if (n == 0) break;
      RETURN_IF_ERROR(Append(std::string_view(buf.data(), n)));
      copied += n;
    }
    if (copied != held) {
      poisoned_ = true;
      return absl::UnavailableError("the partial shrank while it was read");
    }
    return fs_.UnlinkAt(dir_, partial);
  }

 private:
  // A crash between the publication and a resumed Writer's removal of the partial is not
  // possible (Resume removed it first), but an earlier one may have left one: it goes.
  absl::Status DiscardStalePartial() {
    absl::StatusOr<FileInfo> info = fs_.StatAt(dir_, PartialArtifactName(name_));
    if (absl::IsNotFound(info.status())) return absl::OkStatus();
    RETURN_IF_ERROR(info.status());
    absl::Status s = fs_.UnlinkAt(dir_, PartialArtifactName(name_));
    return absl::IsNotFound(s) ? absl::OkStatus() : s;
  }

 private:
  Fs& fs_;
  const Dir dir_;
  const std::string tmp_, name_;
  std::unique_ptr<WritableFile> file_;
  const uint64_t size_;   // declared
  uint64_t written_ = 0;  // bytes that passed the check and were appended
  bool poisoned_ = false;  // a check failed, or Commit ran: never kept as a partial
  release::ArtifactVerifier verifier_;
  std::function<absl::Status()> check_existing_;
  std::function<void(const FileInfo&)> on_published_;
  bool committed_ = false;
  Observer* observer_ = nullptr;
  bool published_own_ = false;  // this Writer's temporary is the published file, durable
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReleaseStore>> ReleaseStore::Open(Fs& fs, const Dir& state,
                                                                 std::string state_path,
                                                                 uint32_t owner,
                                                                 release::PublicKey key) {
  ASSIGN_OR_RETURN(Dir dir, OpenPrivateSubdir(fs, state, "releases", owner));
  // Artifacts a crash left half-written (temporaries) are removed; nothing else is touched.
  ASSIGN_OR_RETURN(std::vector<std::string> sources, fs.ListDir(dir));
  for (const std::string& source : sources) {
    if (!wire::IsReleaseSource(source)) continue;
    absl::StatusOr<Dir> d = OpenPrivateSubdir(fs, dir, source, owner);
    if (!d.ok()) {
      // A foreign source directory is refused whenever it is used; an I/O failure (its fsync,
      // say) stops the start instead of being swallowed (finding D of the crash sweeps).
      if (absl::IsFailedPrecondition(d.status())) continue;
      return d.status();
    }
    RETURN_IF_ERROR(RemoveStrayTemporaries(fs, *d));  // partials stay (HeldPartial checks them)
  }
  return std::unique_ptr<ReleaseStore>(
      new ReleaseStore(fs, std::move(dir), std::move(state_path), owner, std::move(key)));
}

absl::StatusOr<Dir> ReleaseStore::SourceDir(std::string_view source, bool create) {
  if (!wire::IsReleaseSource(source) || source == release::kCurrentFileName) {
    return release::ProvenanceFailure("not a release source name");
  }
  if (!create) {
    absl::StatusOr<FileInfo> info = fs_.StatAt(dir_, source);
    if (!info.ok()) return info.status();
  }
  absl::StatusOr<Dir> d = OpenPrivateSubdir(fs_, dir_, source, owner_);
  if (!d.ok() && absl::IsFailedPrecondition(d.status())) return Ownership(std::string(d.status().message()));
  return d;
}

absl::StatusOr<release::VerifiedRelease> ReleaseStore::Adopt(std::string_view source,
                                                             std::string manifest,
                                                             std::string_view signature,
                                                             std::string_view sums) {
  ASSIGN_OR_RETURN(release::VerifiedRelease verified,
                   release::VerifyRelease(source, manifest, signature, sums, key_));
  ASSIGN_OR_RETURN(Dir dir, SourceDir(source, /*create=*/true));
  RETURN_IF_ERROR(RecordOnce(fs_, dir, release::kManifestFileName, manifest,
                             release::kMaxManifestBytes, owner_));
  RETURN_IF_ERROR(RecordOnce(fs_, dir, release::kSignatureFileName, signature,
                             release::kMaxSignatureFileBytes, owner_));
  RETURN_IF_ERROR(RecordOnce(fs_, dir, release::kSumsFileName, sums, release::kMaxSumsBytes,
                             owner_));
  return verified;
}

absl::StatusOr<release::VerifiedRelease> ReleaseStore::Load(std::string_view source) {
  ASSIGN_OR_RETURN(Dir dir, SourceDir(source, /*create=*/false));
  ASSIGN_OR_RETURN(std::string manifest, ReadPrivateRecord(fs_, dir, release::kManifestFileName,
                                                           release::kMaxManifestBytes, owner_));
  ASSIGN_OR_RETURN(std::string signature,
                   ReadPrivateRecord(fs_, dir, release::kSignatureFileName,
                                     release::kMaxSignatureFileBytes, owner_));
  ASSIGN_OR_RETURN(std::string sums, ReadPrivateRecord(fs_, dir, release::kSumsFileName,
                                                       release::kMaxSumsBytes, owner_));
  return release::VerifyRelease(source, std::move(manifest), signature, sums, key_);
}

absl::Status ReleaseStore::Check(std::string_view source, const wire::RuntimeArtifact& artifact) {
  ASSIGN_OR_RETURN(Dir dir, SourceDir(source, /*create=*/false));
  absl::StatusOr<std::unique_ptr<ReadableFile>> f = fs_.OpenReadAt(dir, artifact.name);
  if (!f.ok()) {
    if (absl::IsNotFound(f.status())) return f.status();
    return Ownership(std::string(f.status().message()));
  }
  const FileInfo& info = (*f)->info();
  if (info.nlink != 1 || info.uid != owner_ || (info.mode & 077) != 0) {
    return Ownership(absl::StrCat("artifact ", artifact.name,
                                  " is linked elsewhere, foreign or not private"));
  }
  release::ArtifactVerifier v(artifact);
  std::string buf(kReadChunk, '\0');
  for (;;) {
    ASSIGN_OR_RETURN(size_t n, (*f)->Read(buf.data(), buf.size()));
    if (n == 0) break;
    RETURN_IF_ERROR(v.Update(std::string_view(buf.data(), n)));
  }
  return v.Finish();
}

void ReleaseStore::RememberPublished(std::string_view source, std::string_view name,
                                     const FileInfo& info) {
  absl::MutexLock lock(&mu_);
  published_[absl::StrCat(AV(source), "/", AV(name))] = info;
}

absl::Status ReleaseStore::CheckRecent(std::string_view source,
                                       const wire::RuntimeArtifact& artifact) {
  std::optional<FileInfo> published;
  {
    absl::MutexLock lock(&mu_);
    auto it = published_.find(absl::StrCat(AV(source), "/", artifact.name));
    if (it != published_.end()) published = it->second;
  }
  if (published.has_value() && wire::IsArtifactName(artifact.name)) {
    ASSIGN_OR_RETURN(Dir dir, SourceDir(source, /*create=*/false));
    absl::StatusOr<FileInfo> now = fs_.StatAt(dir, artifact.name);
    if (now.ok() && now->type == FileType::kRegular && now->dev == published->dev &&
        now->ino == published->ino && now->birth_ns == published->birth_ns &&
        now->size == published->size && now->size == static_cast<uint64_t>(artifact.size) &&
        now->nlink == 1 && now->uid == owner_ && (now->mode & 077) == 0) {
      return absl::OkStatus();
    }
  }
  return Check(source, artifact);
}

absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> ReleaseStore::Write(
    std::string_view source, const wire::RuntimeArtifact& artifact, uint64_t offset) {
  if (!wire::IsArtifactName(artifact.name) || release::IsMetadataName(artifact.name)) {
    return release::ProvenanceFailure("not an artifact name");
  }
  ASSIGN_OR_RETURN(Dir dir, SourceDir(source, /*create=*/true));
  if (offset == 0) {
    RETURN_IF_ERROR(DiscardPartial(source, artifact.name));
  } else {
    ASSIGN_OR_RETURN(uint64_t held, HeldPartial(source, artifact));
    if (offset != held) {
      return PrepFailure(
          absl::StatusCode::kInvalidArgument, Diagnostic::kConfigurationInvalid,
          held == 0 ? absl::StrCat("an upload of ", artifact.name, " at offset ", offset,
                                   ", but privhelper holds no partial of it (offset must be 0)")
                    : absl::StrCat("an upload of ", artifact.name, " at offset ", offset,
                                   ", but privhelper holds ", held,
                                   " bytes of it (offset must be 0 or ", held,
                                   "); the partial is kept"));
    }
  }
  std::random_device rd;
  const std::string tmp = absl::StrCat(".", artifact.name, ".tmp.", rd(), rd());
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                   fs_.CreateExclusiveAt(dir, tmp, ArtifactMode(artifact)));
  const std::string src(source);
  const wire::RuntimeArtifact copy = artifact;
  auto writer = std::make_unique<StoreWriter>(
      fs_, std::move(dir), tmp, artifact.name, std::move(file), artifact,
      [this, src, copy] { return Check(src, copy); },
      [this, src, copy](const FileInfo& info) { RememberPublished(src, copy.name, info); });
  if (offset > 0) RETURN_IF_ERROR(writer->Resume(offset));
  return std::unique_ptr<Writer>(std::move(writer));
}

absl::StatusOr<uint64_t> ReleaseStore::HeldPartial(std::string_view source,
                                                   const wire::RuntimeArtifact& artifact) {
  if (!wire::IsArtifactName(artifact.name)) return uint64_t{0};
  absl::StatusOr<Dir> dir = SourceDir(source, /*create=*/false);
  if (absl::IsNotFound(dir.status())) return uint64_t{0};
  RETURN_IF_ERROR(dir.status());
  absl::StatusOr<FileInfo> info = fs_.StatAt(*dir, PartialArtifactName(artifact.name));
  if (absl::IsNotFound(info.status())) return uint64_t{0};
  RETURN_IF_ERROR(info.status());
  if (info->type == FileType::kRegular && info->nlink == 1 && info->uid == owner_ &&
      (info->mode & 077) == 0 && info->size > 0 &&
      info->size < static_cast<uint64_t>(artifact.size)) {
    return info->size;
  }
  RETURN_IF_ERROR(DiscardPartial(source, artifact.name));
  return uint64_t{0};
}

absl::Status ReleaseStore::DiscardPartial(std::string_view source, std::string_view name) {
  if (!wire::IsArtifactName(name)) return absl::OkStatus();
  absl::StatusOr<Dir> dir = SourceDir(source, /*create=*/false);
  if (absl::IsNotFound(dir.status())) return absl::OkStatus();
  RETURN_IF_ERROR(dir.status());
  // Looked up first: without a partial, no directory operation at all (the crash sweeps'
  // sequences of durable steps stay those of a store without partials).
  absl::StatusOr<FileInfo> info = fs_.StatAt(*dir, PartialArtifactName(name));
  if (absl::IsNotFound(info.status())) return absl::OkStatus();
  RETURN_IF_ERROR(info.status());
  absl::Status s = fs_.UnlinkAt(*dir, PartialArtifactName(name));
  return absl::IsNotFound(s) ? absl::OkStatus() : s;
}

absl::Status ReleaseStore::Remove(std::string_view source, const wire::RuntimeArtifact& artifact) {
  absl::Status checked = Check(source, artifact);
  if (!checked.ok() && !absl::IsNotFound(checked)) return checked;
  RETURN_IF_ERROR(DiscardPartial(source, artifact.name));
  if (!checked.ok()) return checked;
  ASSIGN_OR_RETURN(Dir dir, SourceDir(source, /*create=*/false));
  return fs_.UnlinkAt(dir, artifact.name);
}

absl::Status ReleaseStore::SyncSource(std::string_view source) {
  absl::StatusOr<Dir> dir = SourceDir(source, /*create=*/false);
  if (absl::IsNotFound(dir.status())) return absl::OkStatus();
  RETURN_IF_ERROR(dir.status());
  return fs_.SyncDir(*dir);
}

absl::StatusOr<uint64_t> ReleaseStore::StoredSize(std::string_view source, std::string_view name) {
  if (!wire::IsArtifactName(name)) return absl::NotFoundError("not an artifact name");
  ASSIGN_OR_RETURN(Dir dir, SourceDir(source, /*create=*/false));
  ASSIGN_OR_RETURN(FileInfo info, fs_.StatAt(dir, name));
  if (info.type != FileType::kRegular) return absl::NotFoundError("not a regular file");
  return info.size;
}

absl::StatusOr<std::unique_ptr<ReadableFile>> ReleaseStore::OpenArtifact(std::string_view source,
                                                                         std::string_view name) {
  ASSIGN_OR_RETURN(Dir dir, SourceDir(source, /*create=*/false));
  return fs_.OpenReadAt(dir, name);
}

std::string ReleaseStore::AbsolutePath(std::string_view source, std::string_view name) const {
  return absl::StrCat(state_path_, "/releases/", AV(source), "/", AV(name));
}

}  // namespace sn::privhelper::store

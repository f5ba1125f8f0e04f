// GenerationStore's image identities: an image a generation runs is the one its signed archive
// produces (docs/protocol.md 21a-21c). The identity is derived from the stored archive's own
// bytes (ImageImporter::ArchiveIdentity); <g>.images records that a final configuration's images
// were checked against their archives.
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/final_config.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper::store {
namespace {

absl::Status Refused(Diagnostic d, std::string_view why) {
  return PrepFailure(absl::StatusCode::kFailedPrecondition, d, why);
}

}  // namespace

absl::StatusOr<std::string> GenerationStore::ArchiveIdentity(
    ImageImporter& importer, const std::string& source, const PlannedArtifact& artifact,
    const std::vector<std::string>* acceptable) {
  ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> archive,
                   releases_->OpenArtifact(source, artifact.name));
  ReadableFile* file = archive.get();
  ImageImporter::Skip skip;
  if (file->fd() >= 0) {
    skip = [file](uint64_t n) -> absl::Status {
      if (n > static_cast<uint64_t>(INT64_MAX) ||
          lseek(file->fd(), static_cast<off_t>(n), SEEK_CUR) < 0) {
        return ErrnoStatus(errno, "seek in an image archive");
      }
      return absl::OkStatus();
    };
  }
  absl::StatusOr<std::string> identity = importer.ArchiveIdentity(
      [file](char* buf, size_t n) { return file->Read(buf, n); }, skip,
      static_cast<uint64_t>(artifact.size));
  if (absl::IsInvalidArgument(identity.status())) {
    LogWarning("an image archive does not tell which image it produces",
               {{"artifact", artifact.name}, {"error", std::string(identity.status().message())}});
    return Refused(Diagnostic::kConfigurationInvalid,
                   "the image archive does not tell which image it produces");
  }
  RETURN_IF_ERROR(identity.status());
  if (acceptable != nullptr &&
      std::find(acceptable->begin(), acceptable->end(), *identity) == acceptable->end()) {
    LogWarning("the specification's identities omit the image its archive produces",
               {{"artifact", artifact.name}, {"identity", *identity}});
    return Refused(Diagnostic::kConfigurationInvalid,
                   "the specification's identities omit the image its archive produces");
  }
  return *identity;
}

absl::Status GenerationStore::VerifyImagesDerived(const HeldGeneration& h,
                                                  ImageImporter& importer) {
  const int64_t g = h.generation;
  ASSIGN_OR_RETURN(std::string final_record,
                   ReadPrivateRecord(fs_, dir_, FinalConfigurationName(g), kMaxFinalBytes, owner_));
  absl::StatusOr<std::string> recorded =
      ReadPrivateRecord(fs_, dir_, ImagesDerivedName(g), kMaxImagesDerivedBytes, owner_);
  if (recorded.ok() && ImagesDerivedRecords(*recorded, g, installation_id_, final_record)) {
    return absl::OkStatus();
  }
  if (!recorded.ok() && !absl::IsNotFound(recorded.status())) return recorded.status();
  for (const HeldImage& image : h.images) {
    const PlannedArtifact* archive = nullptr;
    for (const PlannedArtifact& a : h.artifacts) {
      if (a.name == image.artifact) archive = &a;
    }
    if (archive == nullptr) {
      return Refused(Diagnostic::kConfigurationInvalid,
                     "an image names no artifact of the final configuration");
    }
    ASSIGN_OR_RETURN(std::string identity, ArchiveIdentity(importer, h.source, *archive, nullptr));
    if (identity != image.native_image) {
      LogError("a generation's recorded image is not the one its signed archive produces; it "
               "is refused and kept as found",
               {{"generation", g}, {"image", image.name}, {"recorded", image.native_image},
                {"archive_produces", identity}});
      return Refused(Diagnostic::kConfigurationInvalid,
                     "a recorded image is not the one its archive produces");
    }
  }
  LogInfo("a generation's images are the ones their archives produce; recorded",
          {{"generation", g}});
  return PublishReplacing(fs_, dir_, ImagesDerivedName(g),
                          EncodeImagesDerived(g, installation_id_, final_record));
}

}  // namespace sn::privhelper::store

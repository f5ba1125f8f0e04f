#include "privhelper/store/installation.h"

#include "absl/strings/str_cat.h"
#include "common/json/record.h"
#include "common/random.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"
#include "privhelper/store/durable.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper::store {
namespace {

constexpr size_t kMaxInstallationBytes = 4096;

// The record's rules; the codes of common/json/record.h.
absl::StatusOr<std::string> Parse(const std::string& text) {
  ASSIGN_OR_RETURN(json::RecordObject doc,
                   json::RecordObject::Parse(text, kInstallationFile, kMaxInstallationBytes));
  RETURN_IF_ERROR(doc.Schema(1));
  ASSIGN_OR_RETURN(std::string id, doc.String("installation_id"));
  RETURN_IF_ERROR(doc.Finish());
  if (!wire::IsUuid(id)) return doc.MemberMalformed("installation_id", "is not a uuid");
  return id;
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateInstallationId(Fs& fs, const Dir& state, uint32_t owner) {
  const std::string refuse = absl::StrCat(
      "installation identity ", kInstallationFile, " is unusable and is kept for inspection: ");
  // Temporaries of a publication a crash interrupted are never an identity.
  RETURN_IF_ERROR(RemoveStrayTemporaries(fs, state));
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<std::string> text =
        ReadPrivateRecord(fs, state, kInstallationFile, kMaxInstallationBytes, owner);
    if (text.ok()) {
      absl::StatusOr<std::string> id = Parse(*text);
      if (!id.ok()) return absl::FailedPreconditionError(refuse + std::string(id.status().message()));
      return id;
    }
    if (!absl::IsNotFound(text.status())) {
      return absl::FailedPreconditionError(refuse + std::string(text.status().message()));
    }
    ASSIGN_OR_RETURN(std::string id, NewUuidV4());
    nlohmann::json doc = {{"schema", 1}, {"installation_id", id}};
    absl::Status s = PublishOnce(fs, state, kInstallationFile, doc.dump() + "\n");
    if (s.ok()) return id;
    // Another start published one meanwhile: read that one instead (never replace it).
    if (!absl::IsAlreadyExists(s)) return s;
  }
  return absl::FailedPreconditionError(refuse + "it appeared and vanished while starting");
}

absl::StatusOr<std::unique_ptr<FileLock>> LockInstallation(Fs& fs, const Dir& node,
                                                           uint32_t owner) {
  absl::StatusOr<FileInfo> named = fs.StatAt(node, kInstallationLockFile);
  if (absl::IsNotFound(named.status())) {
    absl::StatusOr<std::unique_ptr<WritableFile>> f =
        fs.CreateExclusiveAt(node, kInstallationLockFile, 0600);
    if (f.ok()) {
      RETURN_IF_ERROR((*f)->Sync());
      RETURN_IF_ERROR((*f)->Close());
      RETURN_IF_ERROR(fs.SyncDir(node));
    } else if (!absl::IsAlreadyExists(f.status())) {
      return f.status();
    }
  } else if (!named.ok()) {
    return named.status();
  }
  absl::StatusOr<std::unique_ptr<FileLock>> lock =
      fs.LockAt(node, kInstallationLockFile, LockMode::kExclusive);
  if (absl::IsUnavailable(lock.status())) {
    return absl::UnavailableError("the installation lock is held (a collection or repair runs)");
  }
  if (!lock.ok()) {
    return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kOwnershipRefused,
                       absl::StrCat("installation lock: ", lock.status().message()));
  }
  const FileInfo& held = (*lock)->info();
  if (held.type != FileType::kRegular || held.nlink != 1 || held.uid != owner ||
      (held.mode & 077) != 0) {
    return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kOwnershipRefused,
                       "installation lock: linked elsewhere, foreign or not private");
  }
  return lock;
}

}  // namespace sn::privhelper::store

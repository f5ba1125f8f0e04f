#include "privhelper/store/lease.h"

#include "absl/strings/str_cat.h"
#include "common/json/record.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"
#include "privhelper/store/durable.h"
#include "privhelper/store/prep_failure.h"

namespace sn::privhelper::store {
namespace {

using json = nlohmann::json;

using sn::json::RecordObject;

constexpr size_t kMaxIdentityBytes = 4096;

// The record's rules; the codes of common/json/record.h.
absl::StatusOr<LeaseIdentity> ReadIdentity(std::string_view text) {
  ASSIGN_OR_RETURN(RecordObject d, RecordObject::Parse(text, "lease identity", kMaxIdentityBytes));
  RETURN_IF_ERROR(d.Schema(1));
  LeaseIdentity id;
  ASSIGN_OR_RETURN(id.installation_id, d.String("installation_id"));
  ASSIGN_OR_RETURN(id.generation, d.Int("generation"));
  ASSIGN_OR_RETURN(id.specification_digest, d.String("specification_digest"));
  ASSIGN_OR_RETURN(id.device, d.Uint("device"));
  ASSIGN_OR_RETURN(id.inode, d.Uint("inode"));
  ASSIGN_OR_RETURN(id.birth_ns, d.Int("birth_ns"));
  RETURN_IF_ERROR(d.Finish());
  if (!wire::IsUuid(id.installation_id) || id.generation <= 0 ||
      !wire::IsDigest(id.specification_digest)) {
    return d.Malformed("bad identity");
  }
  return id;
}

absl::Status Refused(std::string_view why, int64_t generation) {
  return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kOwnershipRefused,
                     absl::StrCat("lease of generation ", generation, ": ",
                                  absl::string_view(why.data(), why.size())));
}

}  // namespace

std::string LeaseName(int64_t generation) { return absl::StrCat(generation, ".lease"); }
std::string LeaseIdentityName(int64_t generation) {
  return absl::StrCat(generation, ".lease-identity");
}

std::string EncodeLeaseIdentity(const LeaseIdentity& id) {
  json doc = {{"schema", 1},
              {"installation_id", id.installation_id},
              {"generation", id.generation},
              {"specification_digest", id.specification_digest},
              {"device", id.device},
              {"inode", id.inode},
              {"birth_ns", id.birth_ns}};
  return doc.dump() + "\n";
}

absl::StatusOr<LeaseIdentity> DecodeLeaseIdentity(std::string_view text) {
  absl::StatusOr<LeaseIdentity> id = ReadIdentity(text);
  if (!id.ok()) return sn::json::Recoded(id.status(), absl::StatusCode::kFailedPrecondition);
  return id;
}

absl::Status CreateLease(Fs& fs, const Dir& generations, uint32_t owner, int64_t generation,
                         std::string_view installation_id, std::string_view digest) {
  const std::string lease = LeaseName(generation);
  absl::StatusOr<FileInfo> existing = fs.StatAt(generations, lease);
  if (existing.ok()) {
    // Only a lease this very preparation made complete may be reused; OpenLease checks it.
    absl::StatusOr<std::unique_ptr<FileLock>> ok =
        OpenLease(fs, generations, owner, generation, installation_id, digest, LockMode::kShared);
    if (ok.ok() || absl::IsUnavailable(ok.status())) return absl::OkStatus();
    return ok.status();
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();
  {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, fs.CreateExclusiveAt(generations, lease, 0600));
    RETURN_IF_ERROR(f->Sync());
    RETURN_IF_ERROR(f->Close());
  }
  RETURN_IF_ERROR(fs.SyncDir(generations));
  ASSIGN_OR_RETURN(FileInfo info, fs.StatAt(generations, lease));
  LeaseIdentity id{std::string(installation_id), generation, std::string(digest), info.dev,
                   info.ino, info.birth_ns};
  return PublishOnce(fs, generations, LeaseIdentityName(generation), EncodeLeaseIdentity(id));
}

absl::StatusOr<std::unique_ptr<FileLock>> OpenLease(Fs& fs, const Dir& generations,
                                                    uint32_t owner, int64_t generation,
                                                    std::string_view installation_id,
                                                    std::string_view digest, LockMode mode) {
  const std::string lease = LeaseName(generation);
  absl::StatusOr<FileInfo> named = fs.StatAt(generations, lease);
  if (!named.ok()) return Refused("the lease file is missing", generation);
  if (named->type != FileType::kRegular) return Refused("the lease is not a regular file", generation);
  absl::StatusOr<std::string> text = ReadPrivateRecord(fs, generations, LeaseIdentityName(generation),
                                                       kMaxIdentityBytes, owner);
  if (absl::IsNotFound(text.status())) {
    return Refused("no identity record (an interrupted preparation); kept for inspection",
                   generation);
  }
  if (!text.ok()) return Refused(std::string(text.status().message()), generation);
  absl::StatusOr<LeaseIdentity> id = DecodeLeaseIdentity(*text);
  if (!id.ok()) return Refused(std::string(id.status().message()), generation);
  if (id->installation_id != installation_id || id->generation != generation ||
      id->specification_digest != digest) {
    return Refused("the identity record binds another installation, generation or digest",
                   generation);
  }
  absl::StatusOr<std::unique_ptr<FileLock>> lock = fs.LockAt(generations, lease, mode);
  if (absl::IsUnavailable(lock.status())) return lock.status();  // held by someone else
  if (!lock.ok()) return Refused(std::string(lock.status().message()), generation);
  const FileInfo& held = (*lock)->info();
  if (held.type != FileType::kRegular || held.nlink != 1 || held.uid != owner ||
      (held.mode & 077) != 0) {
    return Refused("the lease file is linked elsewhere, foreign or not private", generation);
  }
  if (held.dev != id->device || held.ino != id->inode || held.birth_ns != id->birth_ns) {
    return Refused("the lease file was replaced (another inode than its identity records)",
                   generation);
  }
  absl::StatusOr<FileInfo> again = fs.StatAt(generations, lease);
  if (!again.ok() || again->dev != held.dev || again->ino != held.ino ||
      again->birth_ns != held.birth_ns) {
    return Refused("the lease path no longer names the locked file", generation);
  }
  return lock;
}

}  // namespace sn::privhelper::store

#include "agent/state/state_files.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/fs/durable.h"
#include "common/fs/posix_fs.h"
#include "common/json/record.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxIdentityBytes = 64 * 1024;

absl::Status Torn(const std::string& path, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(path, ": ", why));
}

}  // namespace

StateFiles::StateFiles(std::string state_dir, fs::Fs* fs)
    : state_dir_(std::move(state_dir)), fs_(fs != nullptr ? fs : fs::PosixFs::Get()) {}

std::string StateFiles::NodeDir() const { return absl::StrCat(state_dir_, "/node"); }
std::string StateFiles::GenerationsDir() const {
  return absl::StrCat(state_dir_, "/generations");
}
std::string StateFiles::IdentityPath() const { return absl::StrCat(NodeDir(), "/identity.json"); }
std::string StateFiles::PendingEnrollmentPath() const {
  return absl::StrCat(NodeDir(), "/enrollment.json");
}
std::string StateFiles::CredentialPath() const { return absl::StrCat(NodeDir(), "/credential"); }
std::string StateFiles::OwnerEpochPath() const { return absl::StrCat(NodeDir(), "/owner_epoch"); }
std::string StateFiles::SpecificationPath(int64_t generation) const {
  return absl::StrCat(GenerationsDir(), "/", generation, ".spec.json");
}

std::string StateFiles::DeploymentPinsPath() const {
  return absl::StrCat(NodeDir(), "/deployment.json");
}
std::string StateFiles::RetentionPath() const {
  return absl::StrCat(NodeDir(), "/retention.json");
}
std::string StateFiles::OperationsDir() const { return absl::StrCat(state_dir_, "/operations"); }
std::string StateFiles::ProgressPath(int64_t generation) const {
  return absl::StrCat(GenerationsDir(), "/", generation, ".progress.json");
}

absl::Status StateFiles::EnsureDirs() const {
  RETURN_IF_ERROR(fs::OpenOrMakeDirPath(*fs_, NodeDir(), 0700).status());
  return fs::OpenOrMakeDirPath(*fs_, GenerationsDir(), 0700).status();
}

namespace {

absl::Status WriteIdentityTo(fs::Fs& fs, const std::string& path, const NodeIdentity& id) {
  Json j = {{"node_id", id.node_id},
            {"installation_id", id.installation_id},
            {"provider", id.provider},
            {"deployment_generation", id.deployment_generation},
            {"specification_digest", id.specification_digest},
            {"runtime_source", id.runtime_source},
            {"core_origin", id.core_origin}};
  return fs::PublishReplacingPath(fs, path, j.dump(2) + "\n");
}

// The record's rules; the codes of common/json/record.h.
absl::StatusOr<NodeIdentity> ParseIdentity(const std::string& path, std::string_view text) {
  ASSIGN_OR_RETURN(json::RecordObject j,
                   json::RecordObject::Parse(text, path, kMaxIdentityBytes));
  NodeIdentity id;
  ASSIGN_OR_RETURN(id.node_id, j.String("node_id"));
  ASSIGN_OR_RETURN(id.installation_id, j.String("installation_id"));
  ASSIGN_OR_RETURN(id.provider, j.String("provider"));
  ASSIGN_OR_RETURN(id.deployment_generation, j.Int("deployment_generation"));
  ASSIGN_OR_RETURN(id.specification_digest, j.String("specification_digest"));
  ASSIGN_OR_RETURN(id.runtime_source, j.String("runtime_source"));
  ASSIGN_OR_RETURN(id.core_origin, j.String("core_origin"));
  RETURN_IF_ERROR(j.Finish());
  if (id.deployment_generation <= 0) {
    return j.MemberMalformed("deployment_generation", "is not a positive integer");
  }
  if (!wire::IsUuid(id.node_id) || !wire::IsUuid(id.installation_id)) {
    return j.Malformed("node_id or installation_id is not a canonical uuid");
  }
  if (!wire::IsDigest(id.specification_digest)) {
    return j.MemberMalformed("specification_digest", "is not a digest");
  }
  if (id.provider.empty()) return j.MemberMalformed("provider", "is empty");
  return id;
}

absl::StatusOr<NodeIdentity> ReadIdentityFrom(fs::Fs& fs, const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, fs::ReadDurableFilePath(fs, path, kMaxIdentityBytes));
  absl::StatusOr<NodeIdentity> id = ParseIdentity(path, text);
  if (!id.ok()) return json::Recoded(id.status(), absl::StatusCode::kDataLoss);
  return id;
}

}  // namespace

absl::Status StateFiles::WriteIdentity(const NodeIdentity& id) const {
  return WriteIdentityTo(*fs_, IdentityPath(), id);
}

absl::StatusOr<NodeIdentity> StateFiles::ReadIdentity() const {
  return ReadIdentityFrom(*fs_, IdentityPath());
}

absl::Status StateFiles::WritePendingEnrollment(const NodeIdentity& id) const {
  return WriteIdentityTo(*fs_, PendingEnrollmentPath(), id);
}

absl::StatusOr<NodeIdentity> StateFiles::ReadPendingEnrollment() const {
  return ReadIdentityFrom(*fs_, PendingEnrollmentPath());
}

absl::Status StateFiles::RemovePendingEnrollment() const {
  return fs::RemoveRecordPath(*fs_, PendingEnrollmentPath());
}

absl::Status StateFiles::WriteCredential(const std::string& credential) const {
  return fs::PublishReplacingPath(*fs_, CredentialPath(), credential);
}

absl::StatusOr<std::string> StateFiles::ReadCredential() const {
  const std::string path = CredentialPath();
  fs::FileInfo info;
  ASSIGN_OR_RETURN(std::string credential, fs::ReadDurableFilePath(*fs_, path, 4096, &info));
  if ((info.mode & 077) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": the credential file must not be readable by group or others"));
  }
  if (credential.empty()) return Torn(path, "empty credential");
  return credential;
}

absl::Status StateFiles::WriteSpecification(int64_t generation, const std::string& bytes) const {
  return fs::PublishReplacingPath(*fs_, SpecificationPath(generation), bytes);
}

FileEpochStore::FileEpochStore(std::string path, fs::Fs* fs)
    : path_(std::move(path)), fs_(fs != nullptr ? fs : fs::PosixFs::Get()) {}

absl::StatusOr<int64_t> FileEpochStore::Load() {
  absl::StatusOr<std::string> text = fs::ReadDurableFilePath(*fs_, path_, 64);
  if (absl::IsNotFound(text.status())) return 0;
  if (!text.ok()) return text.status();
  absl::string_view digits = absl::StripSuffix(*text, "\n");
  int64_t epoch = 0;
  if (digits.empty() || digits[0] == '0' || digits[0] == '+' || digits[0] == '-' ||
      !absl::SimpleAtoi(digits, &epoch) || epoch <= 0) {
    return Torn(path_, "not a positive decimal owner epoch");
  }
  return epoch;
}

absl::Status FileEpochStore::Store(int64_t epoch) {
  if (epoch <= 0) return absl::InvalidArgumentError("owner epoch must be positive");
  return fs::PublishReplacingPath(*fs_, path_, absl::StrCat(epoch, "\n"));
}

}  // namespace sn::agent

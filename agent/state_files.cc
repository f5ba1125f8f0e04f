#include "agent/state_files.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

using json = nlohmann::json;

absl::Status Torn(const std::string& path, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(path, ": ", why));
}

}  // namespace

StateFiles::StateFiles(std::string state_dir) : state_dir_(std::move(state_dir)) {}

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
  RETURN_IF_ERROR(MakeDirs(NodeDir(), 0700));
  return MakeDirs(GenerationsDir(), 0700);
}

namespace {

absl::Status WriteIdentityTo(const std::string& path, const NodeIdentity& id) {
  json j = {{"node_id", id.node_id},
            {"installation_id", id.installation_id},
            {"provider", id.provider},
            {"deployment_generation", id.deployment_generation},
            {"specification_digest", id.specification_digest},
            {"runtime_source", id.runtime_source},
            {"core_origin", id.core_origin}};
  return WriteFileAtomically(path, j.dump(2) + "\n", 0600);
}

absl::StatusOr<NodeIdentity> ReadIdentityFrom(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, 64 * 1024));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Torn(path, "not a JSON object");
  if (j.size() != 7) return Torn(path, "unexpected members");
  NodeIdentity id;
  for (auto [member, field] : {std::pair{"node_id", &id.node_id},
                               std::pair{"installation_id", &id.installation_id},
                               std::pair{"provider", &id.provider},
                               std::pair{"specification_digest", &id.specification_digest},
                               std::pair{"runtime_source", &id.runtime_source},
                               std::pair{"core_origin", &id.core_origin}}) {
    auto it = j.find(member);
    if (it == j.end() || !it->is_string()) {
      return Torn(path, absl::StrCat("member ", member, " missing or not a string"));
    }
    *field = it->get<std::string>();
  }
  auto g = j.find("deployment_generation");
  if (g == j.end() || !g->is_number_integer() || g->get<int64_t>() <= 0) {
    return Torn(path, "member deployment_generation missing or not a positive integer");
  }
  id.deployment_generation = g->get<int64_t>();
  if (!wire::IsUuid(id.node_id) || !wire::IsUuid(id.installation_id)) {
    return Torn(path, "node_id or installation_id is not a canonical uuid");
  }
  if (!wire::IsDigest(id.specification_digest)) return Torn(path, "specification_digest malformed");
  if (id.provider.empty()) return Torn(path, "empty provider");
  return id;
}

}  // namespace

absl::Status StateFiles::WriteIdentity(const NodeIdentity& id) const {
  return WriteIdentityTo(IdentityPath(), id);
}

absl::StatusOr<NodeIdentity> StateFiles::ReadIdentity() const {
  return ReadIdentityFrom(IdentityPath());
}

absl::Status StateFiles::WritePendingEnrollment(const NodeIdentity& id) const {
  return WriteIdentityTo(PendingEnrollmentPath(), id);
}

absl::StatusOr<NodeIdentity> StateFiles::ReadPendingEnrollment() const {
  return ReadIdentityFrom(PendingEnrollmentPath());
}

absl::Status StateFiles::RemovePendingEnrollment() const {
  if (unlink(PendingEnrollmentPath().c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("unlink ", PendingEnrollmentPath()));
  }
  return SyncDirectory(NodeDir());
}

absl::Status StateFiles::WriteCredential(const std::string& credential) const {
  return WriteFileAtomically(CredentialPath(), credential, 0600);
}

absl::StatusOr<std::string> StateFiles::ReadCredential() const {
  const std::string path = CredentialPath();
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat ", path));
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": the credential file must not be readable by group or others"));
  }
  ASSIGN_OR_RETURN(std::string credential, ReadSmallFile(path, 4096));
  if (credential.empty()) return Torn(path, "empty credential");
  return credential;
}

absl::StatusOr<int64_t> FileEpochStore::Load() {
  absl::StatusOr<std::string> text = ReadSmallFile(path_, 64);
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
  return WriteFileAtomically(path_, absl::StrCat(epoch, "\n"), 0600);
}

}  // namespace sn::agent

#include "tools/devcore/specification.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"
#include "tools/devcore/crypto.h"

namespace sn::devcore {
namespace {

std::string PublishedPath(const std::string& state_dir, int64_t generation) {
  return absl::StrCat(state_dir, "/specifications/", generation, ".json");
}

}  // namespace

absl::StatusOr<Specification> LoadSpecification(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadSmallFile(path, wire::kMaxHttpBodyBytes));
  auto doc = wire::DecodeSpecificationDocument(bytes);
  if (!doc.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("specification ", path, " is invalid: ", doc.status().message()));
  }
  Specification spec;
  spec.generation = doc->generation;
  spec.provider = doc->provider;
  spec.runtime_source = doc->runtime_source;
  spec.digest = Sha256Hex(bytes);
  spec.bytes = std::move(bytes);
  return spec;
}

absl::Status PublishSpecification(const std::string& state_dir, const Specification& spec) {
  RETURN_IF_ERROR(MakeDirs(absl::StrCat(state_dir, "/specifications")));
  const std::string path = PublishedPath(state_dir, spec.generation);
  auto existing = ReadSmallFile(path, wire::kMaxHttpBodyBytes);
  if (existing.ok()) {
    if (*existing != spec.bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "generation ", spec.generation, " was already published with other bytes (", path,
          "); a generation's specification never changes: use a new generation"));
    }
    return absl::OkStatus();
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();
  return WriteFileAtomically(path, spec.bytes, 0600);
}

absl::StatusOr<std::string> ReadPublishedSpecification(const std::string& state_dir,
                                                       int64_t generation) {
  return ReadSmallFile(PublishedPath(state_dir, generation), wire::kMaxHttpBodyBytes);
}

}  // namespace sn::devcore

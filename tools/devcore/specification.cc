#include "tools/devcore/specification.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "common/wire/limits.h"
#include "tools/devcore/crypto.h"

namespace sn::devcore {
namespace {

std::string PathOf(const std::string& dir, int64_t generation) {
  return absl::StrCat(dir, "/", generation, ".json");
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus(errno, "open directory " + dir);
  std::vector<std::string> out;
  errno = 0;
  while (const dirent* e = readdir(d)) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") out.emplace_back(n);
    errno = 0;
  }
  const int err = errno;
  closedir(d);
  if (err != 0) return ErrnoStatus(err, "read directory " + dir);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

absl::StatusOr<Specification> ParseSpecification(std::string bytes) {
  absl::StatusOr<wire::SpecificationDocument> doc = wire::DecodeSpecificationDocument(bytes);
  if (!doc.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the specification fails §6: ", doc.status().message()));
  }
  Specification spec;
  spec.generation = doc->generation;
  spec.provider = doc->provider;
  spec.runtime_source = doc->runtime_source;
  spec.digest = Sha256Hex(bytes);
  spec.bytes = std::move(bytes);
  spec.document = *std::move(doc);
  return spec;
}

absl::StatusOr<std::unique_ptr<GenerationStore>> GenerationStore::Open(
    const std::string& state_dir) {
  const std::string dir = absl::StrCat(state_dir, "/specifications");
  RETURN_IF_ERROR(MakeDirs(dir));
  std::unique_ptr<GenerationStore> store(new GenerationStore(dir));
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
  for (const std::string& name : names) {
    if (absl::StrContains(name, ".tmp.")) continue;
    int64_t g = 0;
    if (!absl::EndsWith(name, ".json") ||
        !absl::SimpleAtoi(name.substr(0, name.size() - 5), &g) || g <= 0 ||
        PathOf(dir, g) != absl::StrCat(dir, "/", name)) {
      return absl::FailedPreconditionError(
          absl::StrCat("unexpected file ", dir, "/", name, " among the specifications"));
    }
    ASSIGN_OR_RETURN(std::string bytes, ReadSmallFile(PathOf(dir, g), wire::kMaxHttpBodyBytes));
    absl::StatusOr<Specification> spec = ParseSpecification(std::move(bytes));
    if (!spec.ok() || spec->generation != g) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kept specification ", PathOf(dir, g), " is torn or foreign: ",
          spec.ok() ? "it names another generation" : spec.status().message()));
    }
    store->specs_.emplace(g, *std::move(spec));
  }
  return store;
}

absl::StatusOr<GenerationStore::Added> GenerationStore::Add(const Specification& spec) {
  if (const Specification* held = Find(spec.generation)) {
    if (held->bytes != spec.bytes) {
      return absl::AlreadyExistsError(absl::StrCat(
          "generation ", spec.generation, " is held with other bytes (", PathOf(dir_, spec.generation),
          "); a generation's specification never changes: use a new generation"));
    }
    return Added::kIdentical;
  }
  RETURN_IF_ERROR(WriteFileAtomically(PathOf(dir_, spec.generation), spec.bytes, 0600));
  specs_.emplace(spec.generation, spec);
  return Added::kCreated;
}

const Specification* GenerationStore::Find(int64_t generation) const {
  auto it = specs_.find(generation);
  return it == specs_.end() ? nullptr : &it->second;
}

std::vector<const Specification*> GenerationStore::All() const {
  std::vector<const Specification*> out;
  for (const auto& [g, s] : specs_) out.push_back(&s);
  return out;
}

absl::Status GenerationStore::SetCurrent(int64_t generation) {
  if (Find(generation) == nullptr) {
    return absl::NotFoundError(absl::StrCat("generation ", generation, " is not held"));
  }
  current_ = generation;
  return absl::OkStatus();
}

}  // namespace sn::devcore

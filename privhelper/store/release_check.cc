// ReleaseStore::CheckEveryFile (release_store.h): collection's check of a whole release
// directory before its first deletion (requirements "Restart recovery").
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/release/layout.h"
#include "common/status_macros.h"
#include "privhelper/store/prep_failure.h"
#include "privhelper/store/release_store.h"

namespace sn::privhelper::store {

absl::Status ReleaseStore::CheckEveryFile(std::string_view source) {
  auto refuse = [source](std::string_view name, std::string_view why) {
    return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kOwnershipRefused,
                       absl::StrCat("releases/", absl::string_view(source.data(), source.size()),
                                    "/", absl::string_view(name.data(), name.size()), ": ",
                                    absl::string_view(why.data(), why.size()),
                                    "; nothing is removed"));
  };
  // The metadata, verified again with privhelper's key: without it no file can be known.
  absl::StatusOr<release::VerifiedRelease> rel = Load(source);
  if (absl::IsNotFound(rel.status())) {
    return refuse("manifest.json", "the release metadata is missing, so its files are unknown");
  }
  RETURN_IF_ERROR(rel.status());
  ASSIGN_OR_RETURN(Dir dir, SourceDir(source, /*create=*/false));
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs_.ListDir(dir));
  for (const std::string& name : names) {
    if (release::IsMetadataName(name)) continue;  // Load verified each
    if (name.size() > 1 && name[0] == '.' && absl::EndsWith(name, kPartialSuffix)) {
      // A partial: acceptable only of an artifact the manifest names (collection removes it
      // with that artifact); never checked as the artifact, never makes it present.
      const std::string of = name.substr(1, name.size() - 1 - std::strlen(kPartialSuffix));
      if (rel->Find(of) == nullptr) {
        return refuse(name, "a partial of a file the verified manifest does not name");
      }
      continue;
    }
    const wire::RuntimeArtifact* entry = rel->Find(name);
    if (entry == nullptr) return refuse(name, "a file the verified manifest does not name");
    absl::Status st = Check(source, *entry);
    if (absl::IsNotFound(st)) continue;  // gone meanwhile: nothing to check
    RETURN_IF_ERROR(st);
  }
  return absl::OkStatus();
}

}  // namespace sn::privhelper::store

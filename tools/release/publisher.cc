#include "tools/release/publisher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/atomic_file.h"
#include "common/release/artifact.h"
#include "common/release/layout.h"
#include "common/release/verify.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"
#include "common/wire/validate.h"
#include "tools/release/files.h"

namespace sn::release_tool {
namespace {

constexpr int kDirMode = 0755;   // releases are public: devcore (or a web server) serves them
constexpr int kFileMode = 0644;

absl::Status Conflict(std::string_view message) {
  return absl::FailedPreconditionError(absl::string_view(message.data(), message.size()));
}

std::string Join(const std::string& dir, std::string_view name) {
  return absl::StrCat(dir, "/", std::string(name));
}

// Runs the test seam before a durable step; true means "crash here".
class Steps {
 public:
  explicit Steps(const PublishRequest& r) : hook_(r.step_hook) {}
  bool Crash(std::string_view step) {
    crashed_ = hook_ && !hook_(step);
    return crashed_;
  }
  bool crashed() const { return crashed_; }
  static absl::Status Aborted(std::string_view step) {
    return absl::AbortedError(absl::StrCat("stopped before step ", std::string(step)));
  }

 private:
  std::function<bool(std::string_view)> hook_;
  bool crashed_ = false;
};

absl::Status Validate(const PublishRequest& r) {
  if (!wire::IsReleaseSourceName(r.source)) {
    return absl::InvalidArgumentError(
        "--source must match [A-Za-z0-9][A-Za-z0-9._-]{0,63} and not be \"current\"");
  }
  if (r.artifacts.size() > wire::kMaxManifestArtifacts) {
    return absl::InvalidArgumentError("a release has at most 256 artifacts");
  }
  std::set<std::string> names;
  for (const ArtifactInput& a : r.artifacts) {
    const std::string name = BaseName(a.path);
    if (!wire::IsManifestArtifactKind(a.kind)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown artifact kind \"", a.kind, "\" (agent, privhelper, native_helper, preparer, "
          "helper, firmware, kernel, seccomp, image)"));
    }
    if (!wire::IsArtifactName(name) || release::IsMetadataName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the file name of ", a.path, " is not a valid artifact name "
          "([A-Za-z0-9][A-Za-z0-9._-]{0,127}, not a metadata file name)"));
    }
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("two artifacts are named ", name));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadMetadata(const std::string& dir, std::string_view name,
                                         size_t max_bytes) {
  const std::string path = Join(dir, name);
  ASSIGN_OR_RETURN(EntryType type, TypeOf(path));
  if (type != EntryType::kRegular) {
    return Conflict(absl::StrCat(path, type == EntryType::kMissing
                                           ? " is missing: the release is not complete"
                                           : " is not a regular file"));
  }
  absl::StatusOr<std::string> bytes = ReadSmallFile(path, max_bytes);
  if (absl::IsFailedPrecondition(bytes.status())) {
    return Conflict(absl::StrCat(path, " is larger than ", max_bytes, " bytes"));
  }
  return bytes;
}

// An existing release, verified completely (see publisher.h).
struct Existing {
  release::VerifiedRelease verified;
  std::set<std::string> present;
};

absl::StatusOr<Existing> LoadExisting(const std::string& dir, const std::string& source,
                                      const release::PublicKey& key) {
  const std::vector<std::string> stuck = RemoveStaging(dir);
  if (!stuck.empty()) {
    return Conflict(absl::StrCat("cannot remove leftovers in ", dir, ": ",
                                 absl::StrJoin(stuck, ", ")));
  }
  ASSIGN_OR_RETURN(std::string manifest,
                   ReadMetadata(dir, release::kManifestFileName, release::kMaxManifestBytes));
  ASSIGN_OR_RETURN(std::string sig, ReadMetadata(dir, release::kSignatureFileName,
                                                 release::kMaxSignatureFileBytes));
  ASSIGN_OR_RETURN(std::string sums,
                   ReadMetadata(dir, release::kSumsFileName, release::kMaxSumsBytes));
  absl::StatusOr<release::VerifiedRelease> verified =
      release::VerifyRelease(source, std::move(manifest), sig, sums, key);
  if (!verified.ok()) {
    return Conflict(absl::StrCat("release ", source, " in ", dir,
                                 " does not verify with this key: ",
                                 verified.status().message()));
  }
  Existing e{*std::move(verified), {}};
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
  for (const std::string& n : names) {
    if (release::IsMetadataName(n)) continue;
    if (e.verified.Find(n) == nullptr) {
      return Conflict(absl::StrCat(Join(dir, n), " is neither release metadata nor an "
                                   "artifact the manifest declares"));
    }
    ASSIGN_OR_RETURN(EntryType type, TypeOf(Join(dir, n)));
    if (type != EntryType::kRegular) {
      return Conflict(absl::StrCat(Join(dir, n), " is not a regular file"));
    }
    e.present.insert(n);
  }
  for (const std::string& n : e.present) {
    absl::Status st = release::VerifyFile(Join(dir, n), *e.verified.Find(n));
    if (!st.ok()) {
      return Conflict(absl::StrCat("published artifact ", Join(dir, n),
                                   " does not match its manifest: ", st.message()));
    }
  }
  return e;
}

// Verifies an input file (symlinks followed: it is the operator's path) against `expected`.
absl::Status VerifyInput(const std::string& path, const wire::RuntimeArtifact& expected) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, "open " + path);
  absl::Cleanup closer = [fd] { close(fd); };
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(path + " is not a regular file");
  return release::VerifyOpenFile(fd, expected);
}

absl::Status PublishNew(const PublishRequest& r, const release::PrivateKey& key,
                        const Clock& clock, Steps& steps, PublishResult* result) {
  if (r.artifacts.empty()) {
    return absl::InvalidArgumentError("a new release needs at least one KIND=PATH artifact");
  }
  const std::string release_dir = Join(r.releases_dir, r.source);
  ASSIGN_OR_RETURN(std::string staging, MakeStagingDir(r.releases_dir, kDirMode));
  bool published = false;
  absl::Cleanup remove_staging = [&] {
    if (!published && !steps.crashed()) RemoveTree(staging);
  };
  std::vector<ArtifactInput> inputs = r.artifacts;
  std::sort(inputs.begin(), inputs.end(), [](const ArtifactInput& a, const ArtifactInput& b) {
    return BaseName(a.path) < BaseName(b.path);
  });
  wire::ReleaseManifest manifest;
  manifest.source = r.source;
  manifest.published_at =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", clock.Now(), absl::UTCTimeZone());
  if (steps.Crash("copy-artifacts")) return Steps::Aborted("copy-artifacts");
  for (const ArtifactInput& in : inputs) {
    const std::string name = BaseName(in.path);
    ASSIGN_OR_RETURN(Copied c, CopyNewFile(in.path, Join(staging, name), kFileMode));
    manifest.artifacts.push_back(wire::RuntimeArtifact{name, in.kind, c.sha256, c.size});
  }
  const std::string manifest_bytes = wire::EncodeReleaseManifest(manifest);
  ASSIGN_OR_RETURN(std::string signature, key.Sign(manifest_bytes));
  if (steps.Crash("write-metadata")) return Steps::Aborted("write-metadata");
  RETURN_IF_ERROR(WriteNewFile(Join(staging, release::kManifestFileName), manifest_bytes,
                               kFileMode));
  RETURN_IF_ERROR(WriteNewFile(Join(staging, release::kSignatureFileName),
                               release::FormatSignatureFile(signature), kFileMode));
  RETURN_IF_ERROR(WriteNewFile(Join(staging, release::kSumsFileName),
                               release::FormatSha256Sums(manifest), kFileMode));
  // What is on disk is verified exactly as a later publish (or a node) will verify it.
  ASSIGN_OR_RETURN(Existing check, LoadExisting(staging, r.source, key.public_key()));
  if (check.present.size() != manifest.artifacts.size()) {
    return absl::InternalError("the staged release is incomplete");
  }
  if (steps.Crash("sync-staging")) return Steps::Aborted("sync-staging");
  RETURN_IF_ERROR(SyncDirectory(staging));
  if (steps.Crash("rename-release")) return Steps::Aborted("rename-release");
  absl::Status renamed = RenameNoReplace(staging, release_dir, /*directory=*/true);
  if (absl::IsAlreadyExists(renamed)) {
    return Conflict(absl::StrCat(release_dir, " appeared while publishing"));
  }
  RETURN_IF_ERROR(renamed);
  published = true;
  if (steps.Crash("sync-releases-dir")) return Steps::Aborted("sync-releases-dir");
  RETURN_IF_ERROR(SyncDirectory(r.releases_dir));
  result->created = true;
  return absl::OkStatus();
}

absl::Status AddToExisting(const PublishRequest& r, const release::PrivateKey& key,
                           Steps& steps, PublishResult* result) {
  const std::string release_dir = Join(r.releases_dir, r.source);
  ASSIGN_OR_RETURN(Existing e, LoadExisting(release_dir, r.source, key.public_key()));
  std::set<std::string> after = e.present;
  for (const ArtifactInput& in : r.artifacts) {
    const std::string name = BaseName(in.path);
    const wire::RuntimeArtifact* declared = e.verified.Find(name);
    if (declared == nullptr) {
      return Conflict(absl::StrCat(
          "release ", r.source, " is published and its manifest does not declare ", name,
          ": a published release never changes; publish a new source"));
    }
    if (declared->kind != in.kind) {
      return Conflict(absl::StrCat("release ", r.source, " declares ", name, " as kind ",
                                   declared->kind, ", not ", in.kind));
    }
    if (e.present.contains(name)) {
      absl::Status same = VerifyInput(in.path, *declared);
      if (absl::IsInvalidArgument(same)) return same;
      if (!same.ok()) {
        return Conflict(absl::StrCat(in.path, " differs from artifact ", name, " of release ",
                                     r.source, ": ", same.message()));
      }
    }
    after.insert(name);
  }
  for (const wire::RuntimeArtifact& a : e.verified.manifest().artifacts) {
    if (!after.contains(a.name)) result->missing.push_back(a.name);
  }
  if (r.make_current && !result->missing.empty()) {
    return Conflict(absl::StrCat("release ", r.source, " lacks ",
                                 absl::StrJoin(result->missing, ", "),
                                 ": an incomplete release cannot become current"));
  }
  // Stage every missing artifact and verify it from disk before anything becomes visible.
  std::vector<std::pair<std::string, std::string>> staged;  // staging path, name
  bool committed = false;
  absl::Cleanup remove_staged = [&] {
    if (committed || steps.crashed()) return;
    for (const auto& [path, name] : staged) unlink(path.c_str());
  };
  for (const ArtifactInput& in : r.artifacts) {
    const std::string name = BaseName(in.path);
    if (e.present.contains(name)) continue;
    if (steps.Crash("stage-artifact")) return Steps::Aborted("stage-artifact");
    const std::string tmp = StagingFilePath(release_dir, name);
    ASSIGN_OR_RETURN(Copied c, CopyNewFile(in.path, tmp, kFileMode));
    staged.emplace_back(tmp, name);
    absl::Status st = release::VerifyFile(tmp, *e.verified.Find(name));
    if (!st.ok()) {
      return Conflict(absl::StrCat(in.path, " does not have the bytes release ", r.source,
                                   " declares for ", name, ": ", st.message()));
    }
  }
  committed = true;  // from here on, each rename publishes one complete, verified artifact
  for (const auto& [tmp, name] : staged) {
    if (steps.Crash("rename-artifact")) return Steps::Aborted("rename-artifact");
    RETURN_IF_ERROR(RenameNoReplace(tmp, Join(release_dir, name), /*directory=*/false));
    result->added.push_back(name);
  }
  if (!staged.empty()) {
    if (steps.Crash("sync-release-dir")) return Steps::Aborted("sync-release-dir");
    RETURN_IF_ERROR(SyncDirectory(release_dir));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PublishResult> Publish(const PublishRequest& request,
                                      const release::PrivateKey& key, const Clock& clock) {
  RETURN_IF_ERROR(Validate(request));
  RETURN_IF_ERROR(MakeDirs(request.releases_dir, kDirMode));
  ASSIGN_OR_RETURN(PublishLock lock, PublishLock::Acquire(request.releases_dir));
  RemoveStaging(request.releases_dir);  // a crashed publisher's staging directories
  Steps steps(request);
  PublishResult result;
  const std::string release_dir = Join(request.releases_dir, request.source);
  ASSIGN_OR_RETURN(EntryType type, TypeOf(release_dir));
  if (type == EntryType::kMissing) {
    RETURN_IF_ERROR(PublishNew(request, key, clock, steps, &result));
  } else if (type == EntryType::kDirectory) {
    RETURN_IF_ERROR(AddToExisting(request, key, steps, &result));
  } else {
    return Conflict(absl::StrCat(release_dir, " exists and is not a directory"));
  }
  if (request.make_current) {
    if (steps.Crash("write-current")) return Steps::Aborted("write-current");
    RETURN_IF_ERROR(WriteFileAtomically(Join(request.releases_dir, release::kCurrentFileName),
                                        release::FormatCurrentFile(request.source), kFileMode));
    result.made_current = true;
  }
  return result;
}

}  // namespace sn::release_tool

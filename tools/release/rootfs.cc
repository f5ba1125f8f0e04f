#include "tools/release/rootfs.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "tools/release/rootfs_docker.h"
#include "tools/release/rootfs_ext4.h"
#include "tools/release/rootfs_layer.h"
#include "tools/release/rootfs_tree.h"

namespace sn::release_tool {
namespace {

using rootfs::UniqueFd;

constexpr size_t kHashChunk = 1 << 20;

volatile sig_atomic_t g_signal = 0;

void OnSignal(int sig) { g_signal = sig; }

bool Interrupted() { return g_signal != 0; }

// SIGINT, SIGTERM and SIGHUP are recorded (and polled) instead of ending the process, so the
// throwaway directory is removed; the previous handlers come back at the end.
class SignalGuard {
 public:
  SignalGuard() {
    g_signal = 0;
    struct sigaction sa = {};
    sa.sa_handler = OnSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalGuard() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
};

absl::Status CheckInterrupted() {
  if (!Interrupted()) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat("interrupted by signal ", static_cast<int>(g_signal)));
}

// The working directory is `dir` until destroyed (archive_write_disk resolves against it).
class CwdGuard {
 public:
  static absl::StatusOr<CwdGuard> Enter(int dir_fd) {
    const int saved = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (saved < 0) return ErrnoStatus(errno, "open the working directory");
    CwdGuard g(saved);
    if (fchdir(dir_fd) != 0) return ErrnoStatus(errno, "chdir into the tree");
    return g;
  }
  CwdGuard(CwdGuard&& o) noexcept : saved_(std::move(o.saved_)) {}
  CwdGuard& operator=(CwdGuard&&) = delete;
  ~CwdGuard() {
    if (saved_.valid() && fchdir(saved_.get()) != 0) abort();  // paths would resolve elsewhere
  }

 private:
  explicit CwdGuard(int fd) : saved_(fd) {}
  UniqueFd saved_;
};

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) return ErrnoStatus(errno, "resolve " + path);
  return std::string(buf);
}

// The output's directory exists, the output is not a directory, and (for --dir) the output's
// directory is not inside the tree (the throwaway directory would be in the image).
absl::StatusOr<std::string> CheckOutput(const RootfsRequest& r) {
  const std::string dir = DirOf(r.output);
  ASSIGN_OR_RETURN(std::string real_dir, RealPath(dir));
  struct stat st;
  if (stat(r.output.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(r.output + " is a directory");
  }
  if (r.dir.has_value()) {
    ASSIGN_OR_RETURN(std::string real_tree, RealPath(*r.dir));
    if (real_dir == real_tree || real_dir.rfind(real_tree + "/", 0) == 0) {
      return absl::FailedPreconditionError("the output must not be inside --dir");
    }
  }
  return dir;
}

absl::StatusOr<std::string> MakeWorkDir(const std::string& parent) {
  std::string tmpl = parent + "/.rootfs-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return ErrnoStatus(errno, "mkdtemp in " + parent);
  return tmpl;
}

// The archive's image and its members, checked before anything is written.
absl::StatusOr<rootfs::SavedImage> PickImage(const rootfs::DockerArchive& archive,
                                             const RootfsRequest& r) {
  ASSIGN_OR_RETURN(rootfs::SavedImage image, rootfs::SelectImage(archive.images(), r.image));
  RETURN_IF_ERROR(archive.CheckMember(image.config));
  for (const std::string& layer : image.layers) RETURN_IF_ERROR(archive.CheckMember(layer));
  return image;
}

// Applies the image's layers, lowest first, into the new directory `tree`, then removes every
// extended attribute in it and sets every atime and mtime to the epoch.
absl::Status Extract(const rootfs::DockerArchive& archive, const rootfs::SavedImage& image,
                     const std::string& tree, int64_t epoch) {
  if (mkdir(tree.c_str(), 0755) != 0) return ErrnoStatus(errno, "mkdir " + tree);
  const int fd = open(tree.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open " + tree);
  UniqueFd root(fd);
  if (fchmod(root.get(), 0755) != 0) return ErrnoStatus(errno, "chmod " + tree);
  // A default ACL inherited from FILE's directory would change the modes of what is extracted.
  RETURN_IF_ERROR(rootfs::RemoveXattrs(root.get(), tree));
  {
    ASSIGN_OR_RETURN(CwdGuard cwd, CwdGuard::Enter(root.get()));
    const mode_t old_umask = umask(022);  // directories archive_write_disk creates implicitly
    absl::Cleanup restore_umask = [old_umask] { umask(old_umask); };
    rootfs::ExtractBudget budget;
    for (const std::string& layer : image.layers) {
      RETURN_IF_ERROR(archive.ReadLayer(layer, [&](struct archive* a) {
        return rootfs::ApplyLayer(a, root.get(), layer, &budget, Interrupted);
      }));
    }
  }
  RETURN_IF_ERROR(CheckInterrupted());
  return rootfs::NormalizeTree(root.get(), epoch);
}

// Mode 0644, fsync, and the digest and size of what is on disk.
absl::StatusOr<RootfsResult> Seal(const std::string& image) {
  const int fd = open(image.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open " + image);
  UniqueFd f(fd);
  if (fchmod(fd, 0644) != 0) return ErrnoStatus(errno, "chmod " + image);
  if (fsync(fd) != 0) return ErrnoStatus(errno, "fsync " + image);
  Sha256Stream hash;
  std::vector<char> buf(kHashChunk);
  RootfsResult result;
  for (;;) {
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "read " + image);
    if (n == 0) break;
    hash.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
    result.size += static_cast<uint64_t>(n);
  }
  result.sha256 = hash.FinishHex();
  return result;
}

absl::StatusOr<RootfsResult> BuildIn(const RootfsRequest& r, const std::string& work,
                                     const rootfs::DockerArchive* archive,
                                     const rootfs::SavedImage& image) {
  const std::string source = r.dir.has_value() ? *r.dir : work + "/tree";
  if (archive != nullptr) RETURN_IF_ERROR(Extract(*archive, image, source, r.epoch));
  const int fd = open(source.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open " + source);
  UniqueFd root(fd);
  ASSIGN_OR_RETURN(rootfs::TreeSize tree, rootfs::MeasureTree(root.get()));
  rootfs::Ext4Request req;
  req.source_dir = source;
  req.image = work + "/image.ext4";
  req.work_dir = work;
  req.inodes = rootfs::InodesFor(tree);
  req.size_mib = r.size_mib.value_or(rootfs::SizeMibFor(tree, req.inodes));
  req.epoch = r.epoch;
  if (req.size_mib > kMaxRootfsSizeMib) {
    return absl::FailedPreconditionError(
        absl::StrCat("the tree needs ", req.size_mib, " MiB, over the ", kMaxRootfsSizeMib,
                     " MiB bound"));
  }
  RETURN_IF_ERROR(rootfs::MakeExt4Image(req, Interrupted));
  ASSIGN_OR_RETURN(RootfsResult result, Seal(req.image));
  RETURN_IF_ERROR(CheckInterrupted());
  if (rename(req.image.c_str(), r.output.c_str()) != 0) {
    return ErrnoStatus(errno, "rename the image to " + r.output);
  }
  return result;
}

}  // namespace

absl::StatusOr<int64_t> RootfsEpochFromEnvironment() {
  const char* v = getenv("SOURCE_DATE_EPOCH");
  if (v == nullptr) return kDefaultRootfsEpoch;
  int64_t epoch = 0;
  const std::string text = v;
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(text, &epoch) || epoch < 1 || epoch > kMaxRootfsEpoch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SOURCE_DATE_EPOCH must be whole seconds from 1 to ", kMaxRootfsEpoch,
        " (e2fsprogs reads a fake time of 0 as unset)"));
  }
  return epoch;
}

absl::StatusOr<uint64_t> ParseRootfsSizeMib(std::string_view text) {
  uint64_t mib = 0;
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos ||
      !absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &mib) ||
      mib < kMinRootfsSizeMib || mib > kMaxRootfsSizeMib) {
    return absl::InvalidArgumentError(absl::StrCat("--size-mib must be a whole number from ",
                                                   kMinRootfsSizeMib, " to ",
                                                   kMaxRootfsSizeMib));
  }
  return mib;
}

absl::Status ValidateRootfsRequest(const RootfsRequest& r) {
  if (r.output.empty()) return absl::InvalidArgumentError("rootfs needs --output=FILE");
  if (r.docker_archive.has_value() == r.dir.has_value()) {
    return absl::InvalidArgumentError("rootfs needs exactly one of --docker-archive and --dir");
  }
  if (r.image.has_value() && !r.docker_archive.has_value()) {
    return absl::InvalidArgumentError("--image goes with --docker-archive");
  }
  if (r.output.back() == '/') return absl::InvalidArgumentError("--output names no file");
  return absl::OkStatus();
}

absl::StatusOr<RootfsResult> BuildRootfs(const RootfsRequest& r) {
  RETURN_IF_ERROR(ValidateRootfsRequest(r));
  if (r.docker_archive.has_value() && geteuid() != 0) {
    return absl::PermissionDeniedError(
        "rootfs --docker-archive needs root: the publisher runs rootfs as root in a throwaway "
        "directory (to keep the layers' owners, modes and device nodes)");
  }
  ASSIGN_OR_RETURN(const std::string out_dir, CheckOutput(r));
  std::optional<rootfs::DockerArchive> archive;
  rootfs::SavedImage image;
  if (r.docker_archive.has_value()) {
    ASSIGN_OR_RETURN(archive, rootfs::DockerArchive::Open(*r.docker_archive));
    ASSIGN_OR_RETURN(image, PickImage(*archive, r));
  }
  SignalGuard signals;
  ASSIGN_OR_RETURN(const std::string work, MakeWorkDir(out_dir));
  absl::Cleanup remove_work = [&work] { rootfs::RemoveTreeAt(work); };
  absl::StatusOr<RootfsResult> result =
      BuildIn(r, work, archive.has_value() ? &*archive : nullptr, image);
  if (!result.ok() && Interrupted()) return CheckInterrupted();
  if (!result.ok()) return result.status();
  RETURN_IF_ERROR(SyncDirectory(out_dir));
  return result;
}

}  // namespace sn::release_tool

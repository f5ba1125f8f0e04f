#include "common/fs/durable.h"

#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/status_macros.h"

namespace sn::fs {
namespace {

absl::Status CheckPrivateDir(const FileInfo& i, uint32_t owner, std::string_view what) {
  if (i.type != FileType::kDirectory) {
    return absl::FailedPreconditionError(absl::StrCat(AV(what), " is not a directory"));
  }
  if (i.uid != owner) {
    return absl::FailedPreconditionError(
        absl::StrCat(AV(what), " is owned by uid ", i.uid, ", not ", owner));
  }
  if ((i.mode & 07777) != 0700) {
    return absl::FailedPreconditionError(
        absl::StrCat(AV(what), " has mode 0", absl::Hex(i.mode & 07777), "; 0700 is required"));
  }
  return absl::OkStatus();
}

// A random temporary name. The generator is seeded once per thread from the system's entropy
// (a std::random_device per call cost more than the rest of a publish on a fast filesystem);
// the pid is in the name too, so a forked child that kept the parent's generator still picks
// names of its own.
std::string TempName(std::string_view name) {
  thread_local absl::BitGen gen;
  return absl::StrCat(".", AV(name), ".tmp.", getpid(), ".", absl::Uniform<uint64_t>(gen));
}

absl::Status Publish(Fs& fs, const Dir& dir, std::string_view name, std::string_view bytes,
                     bool once) {
  if (!IsComponent(name) || name[0] == '.') {
    return absl::InvalidArgumentError(absl::StrCat("bad record name \"", AV(name), "\""));
  }
  const std::string tmp = TempName(name);
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, fs.CreateExclusiveAt(dir, tmp, 0600));
  absl::Status s = f->Append(bytes);
  if (s.ok()) s = f->Sync();
  absl::Status c = f->Close();
  if (s.ok()) s = c;
  if (s.ok()) s = fs.RenameAt(dir, tmp, name, once);
  if (!s.ok()) {
    (void)fs.UnlinkAt(dir, tmp);
    return s;
  }
  return fs.SyncDir(dir);
}

}  // namespace

absl::StatusOr<Dir> OpenPrivateSubdir(Fs& fs, const Dir& parent, std::string_view name,
                                      uint32_t owner) {
  absl::StatusOr<FileInfo> info = fs.StatAt(parent, name);
  if (absl::IsNotFound(info.status())) {
    RETURN_IF_ERROR(fs.MakeDirAt(parent, name, 0700));
    RETURN_IF_ERROR(fs.SyncDir(parent));
  } else if (!info.ok()) {
    return info.status();
  }
  ASSIGN_OR_RETURN(Dir dir, fs.OpenDirAt(parent, name));
  ASSIGN_OR_RETURN(FileInfo self, fs.StatDir(dir));
  RETURN_IF_ERROR(CheckPrivateDir(self, owner, absl::StrCat("directory ", AV(name))));
  // Nothing is adopted from a directory whose entries might not be durable (a process killed
  // after a rename and before the directory's fsync): both are made durable before any read.
  RETURN_IF_ERROR(fs.SyncDir(parent));
  RETURN_IF_ERROR(fs.SyncDir(dir));
  return dir;
}

absl::StatusOr<std::string> ReadPrivateRecord(Fs& fs, const Dir& dir, std::string_view name,
                                              size_t max_bytes, uint32_t owner) {
  FileInfo info;
  absl::StatusOr<std::string> bytes = fs.ReadFileAt(dir, name, max_bytes, &info);
  if (!bytes.ok()) return bytes.status();
  if (info.nlink != 1 || info.uid != owner || (info.mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        AV(name), " is not a private, singly linked regular file owned by uid ", owner,
        " (links ", info.nlink, ", uid ", info.uid, ", mode 0", absl::Hex(info.mode), ")"));
  }
  return bytes;
}

absl::Status PublishReplacing(Fs& fs, const Dir& dir, std::string_view name,
                              std::string_view bytes) {
  return Publish(fs, dir, name, bytes, /*once=*/false);
}

absl::Status PublishOnce(Fs& fs, const Dir& dir, std::string_view name, std::string_view bytes) {
  return Publish(fs, dir, name, bytes, /*once=*/true);
}

absl::Status RemoveStrayTemporaries(Fs& fs, const Dir& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(dir));
  bool removed = false;
  for (const std::string& n : names) {
    // A release store's partial (".<name>.partial") is no temporary, whatever its name holds.
    if (n.size() > 1 && n[0] == '.' && absl::StrContains(n, ".tmp.") &&
        !absl::EndsWith(n, ".partial")) {
      RETURN_IF_ERROR(fs.UnlinkAt(dir, n));
      removed = true;
    }
  }
  return removed ? fs.SyncDir(dir) : absl::OkStatus();
}

absl::Status RemoveRecord(Fs& fs, const Dir& dir, std::string_view name) {
  absl::Status s = fs.UnlinkAt(dir, name);
  if (!s.ok() && !absl::IsNotFound(s)) return s;
  // Also when it was absent: an unlink of an earlier attempt may not be durable yet.
  return fs.SyncDir(dir);
}

namespace {

// {directory, last component} of `path`.
absl::StatusOr<std::pair<std::string_view, std::string_view>> SplitPath(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || !IsComponent(path.substr(slash + 1))) {
    return absl::InvalidArgumentError(absl::StrCat("not a file path: \"", AV(path), "\""));
  }
  std::string_view dir = path.substr(0, slash);
  if (dir.empty()) dir = "/";
  return std::make_pair(dir, path.substr(slash + 1));
}

}  // namespace

absl::Status PublishReplacingPath(Fs& fs, std::string_view path, std::string_view bytes) {
  ASSIGN_OR_RETURN(auto split, SplitPath(path));
  ASSIGN_OR_RETURN(Dir dir, fs.OpenPath(split.first));
  return PublishReplacing(fs, dir, split.second, bytes);
}

absl::StatusOr<std::string> ReadFilePath(Fs& fs, std::string_view path, size_t max_bytes,
                                         FileInfo* info) {
  ASSIGN_OR_RETURN(auto split, SplitPath(path));
  ASSIGN_OR_RETURN(Dir dir, fs.OpenPath(split.first));
  return fs.ReadFileAt(dir, split.second, max_bytes, info);
}

absl::StatusOr<std::string> ReadDurableFilePath(Fs& fs, std::string_view path,
                                                size_t max_bytes, FileInfo* info) {
  ASSIGN_OR_RETURN(auto split, SplitPath(path));
  ASSIGN_OR_RETURN(Dir dir, fs.OpenPath(split.first));
  RETURN_IF_ERROR(fs.SyncDir(dir));
  return fs.ReadFileAt(dir, split.second, max_bytes, info);
}

absl::Status RemoveRecordPath(Fs& fs, std::string_view path) {
  ASSIGN_OR_RETURN(auto split, SplitPath(path));
  ASSIGN_OR_RETURN(Dir dir, fs.OpenPath(split.first));
  return RemoveRecord(fs, dir, split.second);
}

absl::StatusOr<Dir> OpenOrMakeDirPath(Fs& fs, std::string_view path, uint32_t mode) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  absl::StatusOr<Dir> dir = fs.OpenPath(path);
  if (!absl::IsNotFound(dir.status())) return dir;
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return dir;
  const std::string_view name = path.substr(slash + 1);
  std::string_view parent_path = path.substr(0, slash);
  if (parent_path.empty()) parent_path = "/";
  ASSIGN_OR_RETURN(Dir parent, OpenOrMakeDirPath(fs, parent_path, mode));
  absl::Status made = fs.MakeDirAt(parent, name, mode);
  if (!made.ok() && !absl::IsAlreadyExists(made)) return made;
  RETURN_IF_ERROR(fs.SyncDir(parent));
  return fs.OpenDirAt(parent, name);
}

}  // namespace sn::fs

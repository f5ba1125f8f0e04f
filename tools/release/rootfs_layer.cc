#include "tools/release/rootfs_layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "tools/release/rootfs_tree.h"

namespace sn::release_tool::rootfs {
namespace {

constexpr int kDiskFlags = ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                           ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                           ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS;
constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kMetaPrefix = ".wh..wh.";
constexpr std::string_view kOpaqueMarker = ".wh..wh..opq";

std::string ArchiveError(archive* a) {
  const char* e = archive_error_string(a);
  return e == nullptr ? "unknown libarchive error" : e;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

class LayerApplier {
 public:
  LayerApplier(int root_fd, const std::string& layer, ExtractBudget* budget)
      : root_fd_(root_fd), layer_(layer), budget_(budget) {}
  ~LayerApplier() {
    if (disk_ != nullptr) archive_write_free(disk_);
  }
  LayerApplier(const LayerApplier&) = delete;
  LayerApplier& operator=(const LayerApplier&) = delete;

  absl::Status Run(archive* layer, const std::function<bool()>& interrupted);

 private:
  absl::Status Refuse(const std::string& entry, std::string_view why) const;
  absl::Status InLayer(const absl::Status& s) const;
  absl::StatusOr<archive*> Disk();
  absl::Status FlushDisk();
  absl::Status Entry(archive* layer, archive_entry* e);
  absl::Status Whiteout(const std::vector<std::string>& parts, const std::string& entry);
  absl::Status Opaque(const std::vector<std::string>& dir, const std::string& entry);
  absl::Status RemoveLower(int dir_fd, const std::string& prefix, const std::string& entry);
  absl::Status ClearTarget(const std::vector<std::string>& parts, bool is_dir,
                           const std::string& entry);
  absl::Status CheckHardlink(archive_entry* e, const std::string& entry) const;
  absl::Status Extract(archive* layer, archive_entry* e, const std::string& entry);
  absl::Status CopyData(archive* layer, archive* disk, const std::string& entry);
  void Record(const std::vector<std::string>& parts);

  const int root_fd_;
  const std::string layer_;
  ExtractBudget* const budget_;
  archive* disk_ = nullptr;
  // Paths this layer put in the tree (and their parents): whiteouts leave them alone.
  absl::flat_hash_set<std::string> written_;
};

absl::Status LayerApplier::Refuse(const std::string& entry, std::string_view why) const {
  return absl::FailedPreconditionError(absl::StrCat(
      "layer ", layer_, ": entry \"", absl::CHexEscape(entry), "\": ",
      absl::string_view(why.data(), why.size())));
}

absl::Status LayerApplier::InLayer(const absl::Status& s) const {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("layer ", layer_, ": ", s.message()));
}

absl::StatusOr<archive*> LayerApplier::Disk() {
  if (disk_ != nullptr) return disk_;
  disk_ = archive_write_disk_new();
  if (disk_ == nullptr) return absl::ResourceExhaustedError("archive_write_disk_new");
  // No archive_write_disk_set_standard_lookup: owners stay the entries' numeric ids.
  if (archive_write_disk_set_options(disk_, kDiskFlags) != ARCHIVE_OK) {
    return absl::InternalError("archive_write_disk_set_options: " + ArchiveError(disk_));
  }
  return disk_;
}

// Applies the modes and times archive_write_disk deferred for directories while every one of
// them is still where it was written (before anything is removed, and at the end).
absl::Status LayerApplier::FlushDisk() {
  if (disk_ == nullptr) return absl::OkStatus();
  const int r = archive_write_close(disk_);
  const std::string error = ArchiveError(disk_);
  archive_write_free(disk_);
  disk_ = nullptr;
  if (r != ARCHIVE_OK) return absl::FailedPreconditionError("layer " + layer_ + ": " + error);
  return absl::OkStatus();
}

absl::Status LayerApplier::Run(archive* layer, const std::function<bool()>& interrupted) {
  for (;;) {
    if (interrupted()) return absl::AbortedError("interrupted");
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(layer, &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK) {
      return absl::FailedPreconditionError("layer " + layer_ + ": " + ArchiveError(layer));
    }
    if (++budget_->entries > kMaxLayerEntries) {
      return absl::FailedPreconditionError(
          absl::StrCat("the layers hold more than ", kMaxLayerEntries, " entries"));
    }
    RETURN_IF_ERROR(Entry(layer, e));
  }
  return FlushDisk();
}

absl::Status LayerApplier::Entry(archive* layer, archive_entry* e) {
  const char* raw = archive_entry_pathname(e);
  const std::string entry = raw == nullptr ? "" : raw;
  absl::StatusOr<std::vector<std::string>> parts = SplitEntryName(entry);
  if (!parts.ok()) return InLayer(parts.status());
  if (parts->empty()) return absl::OkStatus();  // the root: mke2fs makes it 0755 root:root
  const std::string base = parts->back();
  if (base == kOpaqueMarker) {
    parts->pop_back();
    return Opaque(*parts, entry);
  }
  if (StartsWith(base, kMetaPrefix)) return absl::OkStatus();
  if (StartsWith(base, kWhiteoutPrefix)) {
    parts->back() = base.substr(kWhiteoutPrefix.size());
    if (parts->back().empty() || parts->back() == "." || parts->back() == "..") {
      return Refuse(entry, "is a whiteout that names no file");
    }
    return Whiteout(*parts, entry);
  }
  const bool is_dir =
      archive_entry_filetype(e) == AE_IFDIR && archive_entry_hardlink(e) == nullptr;
  RETURN_IF_ERROR(ClearTarget(*parts, is_dir, entry));
  RETURN_IF_ERROR(Extract(layer, e, entry));
  Record(*parts);
  return absl::OkStatus();
}

absl::Status LayerApplier::Whiteout(const std::vector<std::string>& parts,
                                    const std::string& entry) {
  if (written_.contains(JoinComponents(parts, parts.size()))) return absl::OkStatus();
  absl::StatusOr<UniqueFd> dir = OpenDirBelow(root_fd_, parts, parts.size() - 1, entry);
  if (!dir.ok()) return InLayer(dir.status());
  if (!dir->valid()) return absl::OkStatus();
  struct stat st;
  if (fstatat(dir->get(), parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(errno, "stat " + JoinComponents(parts, parts.size()));
  }
  RETURN_IF_ERROR(FlushDisk());
  return RemoveAt(dir->get(), parts.back());
}

absl::Status LayerApplier::Opaque(const std::vector<std::string>& dir, const std::string& entry) {
  absl::StatusOr<UniqueFd> fd = OpenDirBelow(root_fd_, dir, dir.size(), entry);
  if (!fd.ok()) return InLayer(fd.status());
  if (!fd->valid()) return absl::OkStatus();
  RETURN_IF_ERROR(FlushDisk());
  return RemoveLower(fd->get(), JoinComponents(dir, dir.size()), entry);
}

// Removes what is below `dir_fd` (at `prefix`) except what this layer wrote.
absl::Status LayerApplier::RemoveLower(int dir_fd, const std::string& prefix,
                                       const std::string& entry) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir_fd));
  for (const std::string& name : names) {
    const std::string path = prefix.empty() ? name : absl::StrCat(prefix, "/", name);
    if (!written_.contains(path)) {
      RETURN_IF_ERROR(RemoveAt(dir_fd, name));
      continue;
    }
    ASSIGN_OR_RETURN(UniqueFd sub, OpenDirBelow(dir_fd, {name}, 1, entry));
    if (sub.valid()) RETURN_IF_ERROR(RemoveLower(sub.get(), path, entry));
  }
  return absl::OkStatus();
}

// What is at the entry's path goes, unless both are directories (they merge).
absl::Status LayerApplier::ClearTarget(const std::vector<std::string>& parts, bool is_dir,
                                       const std::string& entry) {
  absl::StatusOr<UniqueFd> dir = OpenDirBelow(root_fd_, parts, parts.size() - 1, entry);
  if (!dir.ok()) return InLayer(dir.status());
  if (!dir->valid()) return absl::OkStatus();
  struct stat st;
  if (fstatat(dir->get(), parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(errno, "stat " + JoinComponents(parts, parts.size()));
  }
  if (S_ISDIR(st.st_mode) && is_dir) return absl::OkStatus();
  if (S_ISDIR(st.st_mode)) RETURN_IF_ERROR(FlushDisk());
  return RemoveAt(dir->get(), parts.back());
}

// A hard link's target is inside the tree and reached through no symbolic link.
absl::Status LayerApplier::CheckHardlink(archive_entry* e, const std::string& entry) const {
  const char* target = archive_entry_hardlink(e);
  if (target == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> parts = SplitEntryName(target);
  if (!parts.ok() || parts->empty()) {
    return Refuse(entry, absl::StrCat("is a hard link to \"", absl::CHexEscape(target),
                                      "\", outside the root"));
  }
  absl::StatusOr<UniqueFd> dir = OpenDirBelow(root_fd_, *parts, parts->size() - 1, entry);
  return InLayer(dir.status());
}

absl::Status LayerApplier::Extract(archive* layer, archive_entry* e, const std::string& entry) {
  RETURN_IF_ERROR(CheckHardlink(e, entry));
  const la_int64_t size = archive_entry_size(e);
  if (size > 0 && budget_->bytes + static_cast<uint64_t>(size) > kMaxLayerBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("the layers hold more than ", kMaxLayerBytes, " bytes of files"));
  }
  ASSIGN_OR_RETURN(archive * disk, Disk());
  if (archive_write_header(disk, e) != ARCHIVE_OK) return Refuse(entry, ArchiveError(disk));
  RETURN_IF_ERROR(CopyData(layer, disk, entry));
  if (archive_write_finish_entry(disk) != ARCHIVE_OK) return Refuse(entry, ArchiveError(disk));
  return absl::OkStatus();
}

absl::Status LayerApplier::CopyData(archive* layer, archive* disk, const std::string& entry) {
  for (;;) {
    const void* buf = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    const int r = archive_read_data_block(layer, &buf, &size, &offset);
    if (r == ARCHIVE_EOF) return absl::OkStatus();
    if (r != ARCHIVE_OK) return Refuse(entry, ArchiveError(layer));
    budget_->bytes += size;
    if (budget_->bytes > kMaxLayerBytes) {
      return absl::FailedPreconditionError(
          absl::StrCat("the layers hold more than ", kMaxLayerBytes, " bytes of files"));
    }
    if (archive_write_data_block(disk, buf, size, offset) != ARCHIVE_OK) {
      return Refuse(entry, ArchiveError(disk));
    }
  }
}

void LayerApplier::Record(const std::vector<std::string>& parts) {
  for (size_t n = 1; n <= parts.size(); ++n) written_.insert(JoinComponents(parts, n));
}

}  // namespace

absl::Status ApplyLayer(archive* layer, int root_fd, const std::string& layer_name,
                        ExtractBudget* budget, const std::function<bool()>& interrupted) {
  LayerApplier applier(root_fd, layer_name, budget);
  return applier.Run(layer, interrupted);
}

}  // namespace sn::release_tool::rootfs

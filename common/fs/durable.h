// The durable-file discipline of the node's state (docs/formats.md), on the Fs seam, for
// privhelper's store and the agent's files alike:
//  - private directories: owned by the process's uid, mode 0700 exactly, never a symlink
//    (privhelper's state directory itself is opened through a trusted path:
//    privhelper/store/state_dir.h);
//  - private records: regular, singly linked, owned by the process's uid, no group/other
//    bits; a record that breaks this is refused and left in place for inspection (privhelper);
//  - publication: write a temporary ".<name>.tmp.<random>" exclusively (0600), fsync it, rename
//    it to <name> (replacing, or with RENAME_NOREPLACE for write-once records), fsync the
//    directory. Readers ignore names starting with '.'; a start removes what a crash left.
//  - removal: unlink, fsync the directory.
#ifndef SANDBOX_NODE_COMMON_FS_DURABLE_H_
#define SANDBOX_NODE_COMMON_FS_DURABLE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/fs/fs.h"

namespace sn::fs {

// Opens the private subdirectory `name` of `parent`, creating it (0700, durably) when missing.
// Both directories are fsynced before it returns, so every entry read from them afterwards is
// durable (nothing a crash can take back is ever adopted).
absl::StatusOr<Dir> OpenPrivateSubdir(Fs& fs, const Dir& parent, std::string_view name,
                                      uint32_t owner);

// Reads the private record `name` (at most `max_bytes`). NotFound when absent;
// FailedPrecondition when it is not a private, singly linked regular file owned by `owner`.
absl::StatusOr<std::string> ReadPrivateRecord(Fs& fs, const Dir& dir, std::string_view name,
                                              size_t max_bytes, uint32_t owner);

// Publishes `bytes` as `name` (0600), replacing any previous record.
absl::Status PublishReplacing(Fs& fs, const Dir& dir, std::string_view name,
                              std::string_view bytes);

// Publishes `bytes` as `name` (0600) only if nothing is there: AlreadyExists (and nothing
// changed) when `name` exists. Write-once records use this.
absl::Status PublishOnce(Fs& fs, const Dir& dir, std::string_view name, std::string_view bytes);

// Removes temporaries (".<name>.tmp.<random>") a crash left in `dir`.
absl::Status RemoveStrayTemporaries(Fs& fs, const Dir& dir);

// Removes the record `name` durably (unlink, then fsync of `dir`); OK when it is absent.
absl::Status RemoveRecord(Fs& fs, const Dir& dir, std::string_view name);

// Files named by path, for a process whose state is not privhelper's (the agent): the
// directory part of `path` is opened with Fs::OpenPath, the last component is the record.
// PublishReplacingPath: as PublishReplacing (temporary, fsync, rename, fsync of the
// directory). ReadFilePath: the regular file (never through a symlink) of at most
// `max_bytes`. RemoveRecordPath: as RemoveRecord. InvalidArgument for a path without a
// directory part or whose last component is not a record name.
absl::Status PublishReplacingPath(Fs& fs, std::string_view path, std::string_view bytes);
absl::StatusOr<std::string> ReadFilePath(Fs& fs, std::string_view path, size_t max_bytes,
                                         FileInfo* info = nullptr);
absl::Status RemoveRecordPath(Fs& fs, std::string_view path);
// ReadFilePath after an fsync of the file's directory: what a start adopts is durable first
// (a rename a kill -9 left unsynced cannot be taken back by a later power loss).
absl::StatusOr<std::string> ReadDurableFilePath(Fs& fs, std::string_view path,
                                                size_t max_bytes, FileInfo* info = nullptr);

// Opens the directory `path` (Fs::OpenPath), first creating it and any missing parent with
// `mode`, each creation made durable (fsync of its parent) before it is used.
absl::StatusOr<Dir> OpenOrMakeDirPath(Fs& fs, std::string_view path, uint32_t mode = 0700);

}  // namespace sn::fs

#endif  // SANDBOX_NODE_COMMON_FS_DURABLE_H_

#include "tools/install/apply.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/release/artifact.h"
#include "common/release/failure.h"
#include "common/status_macros.h"
#include "tools/install/record.h"

namespace sn::install {
namespace {

std::string ModeString(int mode) { return absl::StrFormat("%04o", mode); }

absl::Status Conflict(const Step& s, std::string_view what) {
  return Refuse(absl::StrCat(s.path, " ", std::string(what),
                             "; the installer never overwrites it (edited by hand, or "
                             "installed with other options?)"));
}

absl::Status CheckOwnerMode(const Step& s, const struct stat& st) {
  if (st.st_uid != s.uid || st.st_gid != s.gid || static_cast<int>(st.st_mode & 07777) != s.mode) {
    return Conflict(s, absl::StrCat("is owned by ", st.st_uid, ":", st.st_gid, " with mode ",
                                    ModeString(static_cast<int>(st.st_mode & 07777)), ", not ",
                                    s.uid, ":", s.gid, " ", ModeString(s.mode)));
  }
  return absl::OkStatus();
}

absl::Status ParentDir(const std::string& path) {
  return MakeDirs(path.substr(0, path.rfind('/')), 0755);
}

// The staged copy's bytes into `tmp` (new), with the step's mode, fsynced.
absl::Status CopyStaged(const Step& s, const std::string& tmp) {
  int in = open(s.source.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return ErrnoStatus(errno, "open " + s.source);
  int out = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
  if (out < 0) {
    close(in);
    return ErrnoStatus(errno, "create " + tmp);
  }
  absl::Status st;
  std::string buf(64 * 1024, '\0');
  for (;;) {
    ssize_t n = read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = ErrnoStatus(errno, "read " + s.source);
      break;
    }
    if (n == 0) break;
    size_t off = 0;
    while (off < static_cast<size_t>(n)) {
      ssize_t w = write(out, buf.data() + off, static_cast<size_t>(n) - off);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        st = ErrnoStatus(errno, "write " + tmp);
        break;
      }
      off += static_cast<size_t>(w);
    }
    if (!st.ok()) break;
  }
  close(in);
  if (st.ok() && fchmod(out, static_cast<mode_t>(s.mode)) != 0)
    st = ErrnoStatus(errno, "chmod " + tmp);
  if (st.ok() && fsync(out) != 0) st = ErrnoStatus(errno, "fsync " + tmp);
  close(out);
  return st;
}

// The executable under a temporary name — a copy of the staged file, or, for a second name of
// the same bytes, a hard link to the first (`link_to`) — verified again before it takes its
// name, then renamed into place.
absl::Status InstallBinary(const Step& s) {
  const std::string dir = s.path.substr(0, s.path.rfind('/'));
  const std::string tmp = absl::StrCat(dir, "/.", s.path.substr(dir.size() + 1), ".install-tmp");
  unlink(tmp.c_str());
  absl::Status st;
  if (s.link_to.empty()) {
    st = CopyStaged(s, tmp);
  } else if (link(s.link_to.c_str(), tmp.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("link ", s.link_to, " as ", tmp));
  }
  if (st.ok()) st = release::VerifyFile(tmp, s.artifact);
  if (st.ok() && rename(tmp.c_str(), s.path.c_str()) != 0) st = ErrnoStatus(errno, "rename " + tmp);
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  return SyncDirectory(dir);
}

}  // namespace

absl::StatusOr<Outcome> Apply(const Step& s, bool check_only) {
  struct stat st;
  if (lstat(s.path.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoStatus(errno, "lstat " + s.path);
    // A missing directory holds nothing installed (e.g. /run/sandbox-node, which systemd
    // removes while privhelper is stopped): it is made again even on an installed host.
    if (check_only && s.kind != Step::Kind::kDir) {
      return Refuse(absl::StrCat(s.path,
                                 " of this installed node is missing (repair is not the "
                                 "installer's: see docs/operator-guide.md)"));
    }
    RETURN_IF_ERROR(ParentDir(s.path));
    switch (s.kind) {
      case Step::Kind::kDir:
        if (mkdir(s.path.c_str(), 0700) != 0) return ErrnoStatus(errno, "mkdir " + s.path);
        if (chown(s.path.c_str(), s.uid, s.gid) != 0) return ErrnoStatus(errno, "chown " + s.path);
        if (chmod(s.path.c_str(), static_cast<mode_t>(s.mode)) != 0) {
          return ErrnoStatus(errno, "chmod " + s.path);
        }
        RETURN_IF_ERROR(SyncDirectory(s.path.substr(0, s.path.rfind('/'))));
        break;
      case Step::Kind::kFile:
        RETURN_IF_ERROR(WriteFileAtomically(s.path, s.contents, s.mode));
        break;
      case Step::Kind::kBinary:
        RETURN_IF_ERROR(InstallBinary(s));
        break;
    }
    return Outcome::kCreated;
  }
  switch (s.kind) {
    case Step::Kind::kDir:
      if (!S_ISDIR(st.st_mode)) return Conflict(s, "exists and is not a directory");
      RETURN_IF_ERROR(CheckOwnerMode(s, st));
      return Outcome::kUnchanged;
    case Step::Kind::kFile: {
      if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
        return Conflict(s, "exists and is not a singly linked regular file");
      }
      RETURN_IF_ERROR(CheckOwnerMode(s, st));
      absl::StatusOr<std::string> have = ReadSmallFile(s.path, kMaxRecordBytes * 16);
      if (!have.ok()) return have.status();
      if (*have != s.contents) return Conflict(s, "exists with other contents");
      return Outcome::kUnchanged;
    }
    case Step::Kind::kBinary: {
      if (!S_ISREG(st.st_mode)) return Conflict(s, "exists and is not a regular file");
      RETURN_IF_ERROR(CheckOwnerMode(s, st));
      absl::Status v = release::VerifyFile(s.path, s.artifact);
      if (release::FailureClassOf(v).has_value()) {
        return Conflict(s, absl::StrCat("exists with other bytes than the pinned release's ",
                                        s.artifact.name, " (sha256 ", s.artifact.sha256, ")"));
      }
      RETURN_IF_ERROR(v);
      return Outcome::kUnchanged;
    }
  }
  return Outcome::kUnchanged;
}

}  // namespace sn::install

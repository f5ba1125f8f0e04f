#include "privhelper/microvm/image_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "privhelper/store/prep_failure.h"
#include "privhelper/store/safe_dir.h"

namespace sn::microvm {
namespace {

constexpr char kPrefix[] = "sha256:";
constexpr char kTempPrefix[] = ".load-";
constexpr size_t kChunk = 1 << 20;

using privhelper::OwnedFd;
using privhelper::store::PrepFailure;

// A failed system call of the store, typed with its §7 diagnostic: a full disk is
// storage_exhausted, anything else provider_unavailable.
absl::Status Failed(int err, std::string_view what) {
  const bool full = err == ENOSPC || err == EDQUOT;
  return PrepFailure(full ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kUnavailable,
                     full ? Diagnostic::kStorageExhausted : Diagnostic::kProviderUnavailable,
                     absl::StrCat(absl::string_view(what.data(), what.size()), ": ",
                                  std::strerror(err)));
}

absl::Status BadContent(std::string_view what, std::string_view why) {
  return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kConfigurationInvalid,
                     absl::StrCat(absl::string_view(what.data(), what.size()), ": ",
                                  absl::string_view(why.data(), why.size())));
}

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

uint32_t Le32(std::string_view b, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 3])) << 24;
}

// Reads exactly `size` bytes from `source`, giving each piece to `sink` and the first
// kFilesystemMagicBytes to `head`, then lets `check` judge the head. configuration_invalid
// when the source ends early or yields more.
absl::Status ReadAll(const privhelper::ImageImporter::Source& source, uint64_t size,
                     std::string_view what, std::string* head,
                     const std::function<absl::Status(std::string_view)>& sink,
                     const std::function<absl::Status(std::string_view head)>& check) {
  std::string buf(kChunk, '\0');
  uint64_t left = size;
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    ASSIGN_OR_RETURN(size_t got, source(buf.data(), want));
    if (got == 0) {
      return BadContent(what, absl::StrCat(size - left, " of ", size, " bytes arrived"));
    }
    if (got > want) return BadContent(what, "the source yielded more than asked");
    const std::string_view piece(buf.data(), got);
    if (head->size() < kFilesystemMagicBytes) {
      head->append(piece.substr(0, kFilesystemMagicBytes - head->size()));
    }
    RETURN_IF_ERROR(sink(piece));
    left -= got;
  }
  return check ? check(*head) : absl::OkStatus();
}

absl::Status CheckFilesystemImage(std::string_view head) {
  if (!LooksLikeFilesystemImage(head)) {
    return BadContent("image", "not an ext4 or erofs filesystem image");
  }
  return absl::OkStatus();
}

absl::Status WriteAllFd(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Failed(errno, "write");
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsStoreFile(const struct stat& st) {
  return S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 07777) == 0444 &&
         st.st_nlink == 1;
}

absl::StatusOr<std::string> WriteContentFile(const std::string& dir,
                                             const privhelper::ImageImporter::Source& source,
                                             uint64_t size, const ContentRules& rules) {
  if (absl::Status made = MakeDirs(dir, 0755); !made.ok()) {
    return PrepFailure(absl::StatusCode::kUnavailable, Diagnostic::kProviderUnavailable,
                       std::string(made.message()));
  }
  unsigned char rnd[8];
  if (getrandom(rnd, sizeof(rnd), 0) != static_cast<ssize_t>(sizeof(rnd))) {
    return Failed(errno, "getrandom");
  }
  const std::string temp = absl::StrCat(
      dir, "/", kTempPrefix,
      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(rnd), sizeof(rnd))));
  OwnedFd out(open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (out.get() < 0) return Failed(errno, "create " + temp);
  Sha256Stream hash;
  std::string head;
  absl::Status s = ReadAll(
      source, size, rules.what, &head,
      [&](std::string_view piece) {
        hash.Update(piece);
        return WriteAllFd(out.get(), piece);
      },
      rules.check_head);
  const std::string hex = s.ok() ? hash.FinishHex() : "";
  if (s.ok() && !rules.expected_sha256.empty() && hex != rules.expected_sha256) {
    s = BadContent(rules.what, "the bytes do not hash to their recorded sha256");
  }
  const std::string name = absl::StrCat("sha256-", hex, AV(rules.suffix));
  if (s.ok() && fsync(out.get()) != 0) s = Failed(errno, "fsync " + temp);
  if (s.ok() && fchmod(out.get(), 0444) != 0) s = Failed(errno, "chmod " + temp);
  if (s.ok() && rename(temp.c_str(), (dir + "/" + name).c_str()) != 0) {
    s = Failed(errno, "rename " + temp);
  }
  if (!s.ok()) {
    unlink(temp.c_str());
    return s;
  }
  if (!SyncDirectory(dir).ok()) return Failed(EIO, "fsync " + dir);
  return hex;
}

absl::Status RemoveTemporaryFiles(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr && errno == ENOENT) return absl::OkStatus();
  if (d == nullptr) return Failed(errno, "open " + dir);
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    if (std::string_view(e->d_name).substr(0, sizeof(kTempPrefix) - 1) == kTempPrefix) {
      stale.push_back(e->d_name);
    }
  }
  closedir(d);
  for (const std::string& name : stale) {
    if (unlink((dir + "/" + name).c_str()) != 0 && errno != ENOENT) {
      return Failed(errno, "remove " + name);
    }
  }
  if (stale.empty() || SyncDirectory(dir).ok()) return absl::OkStatus();
  return Failed(EIO, "fsync " + dir);
}

bool LooksLikeFilesystemImage(std::string_view head) {
  if (head.size() < kFilesystemMagicBytes) return false;
  const bool ext = static_cast<unsigned char>(head[1080]) == 0x53 &&
                   static_cast<unsigned char>(head[1081]) == 0xEF;
  const bool erofs = Le32(head, 1024) == 0xE0F5E1E2u;
  return ext || erofs;
}

std::string MicrovmImageStore::FileName(std::string_view identity) {
  const std::string_view prefix(kPrefix);
  if (identity.size() != prefix.size() + 64 || identity.substr(0, prefix.size()) != prefix) {
    return "";
  }
  const std::string_view hex = identity.substr(prefix.size());
  if (!IsLowerHex(hex)) return "";
  return absl::StrCat("sha256-", absl::string_view(hex.data(), hex.size()), ".img");
}

absl::Status MicrovmImageStore::Recover() { return RemoveTemporaryFiles(dir_); }

absl::StatusOr<std::string> MicrovmImageStore::ArchiveIdentity(const Source& source,
                                                               const Skip& /*skip*/,
                                                               uint64_t size) {
  Sha256Stream hash;
  std::string head;
  RETURN_IF_ERROR(ReadAll(
      source, size, "image", &head,
      [&](std::string_view piece) {
        hash.Update(piece);
        return absl::OkStatus();
      },
      CheckFilesystemImage));
  return absl::StrCat(kPrefix, hash.FinishHex());
}

absl::Status MicrovmImageStore::Load(const Source& source, uint64_t size) {
  ContentRules rules;
  rules.what = "image";
  rules.suffix = ".img";
  rules.check_head = CheckFilesystemImage;
  absl::StatusOr<std::string> written = WriteContentFile(dir_, source, size, rules);
  return written.ok() ? absl::OkStatus() : written.status();
}

absl::StatusOr<std::string> MicrovmImageStore::Resolve(const std::string& identity) {
  absl::StatusOr<std::string> path = PathOf(identity);
  if (!path.ok()) return path.status();
  return identity;
}

absl::StatusOr<std::string> MicrovmImageStore::PathOf(const std::string& identity) const {
  const std::string name = FileName(identity);
  if (name.empty()) return absl::NotFoundError("not an image identity");
  const std::string path = dir_ + "/" + name;
  OwnedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0 && errno == ENOENT) return absl::NotFoundError("the store holds no such image");
  if (fd.get() < 0) {
    return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kOwnershipRefused,
                       absl::StrCat("image ", name, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Failed(errno, "stat " + path);
  if (!IsStoreFile(st)) {
    return PrepFailure(
        absl::StatusCode::kFailedPrecondition, Diagnostic::kOwnershipRefused,
        absl::StrCat("image ", name, ": not a regular, single-linked 0444 file of privhelper's uid"));
  }
  return path;
}

absl::Status MicrovmImageStore::ForgetImages(const std::vector<std::string>& native_images) {
  bool removed = false;
  for (const std::string& image : native_images) {
    // A path Resolve answered, or an identity.
    std::string name = FileName(image);
    if (name.empty() && image.rfind(dir_ + "/", 0) == 0) {
      name = image.substr(dir_.size() + 1);
      if (name.size() != 75 || FileName(absl::StrCat(kPrefix, name.substr(7, 64))) != name) {
        name.clear();
      }
    }
    if (name.empty()) {
      return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kConfigurationInvalid,
                         "not an image of this store: " + image);
    }
    if (unlink((dir_ + "/" + name).c_str()) == 0) {
      removed = true;
    } else if (errno != ENOENT) {
      return Failed(errno, "remove image " + name);
    }
  }
  if (!removed || SyncDirectory(dir_).ok()) return absl::OkStatus();
  return Failed(EIO, "fsync " + dir_);
}

}  // namespace sn::microvm

#include "common/token_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sn {
namespace {

absl::Status Refused(const std::string& what, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(what, " ", why));
}

// Reads up to kMaxTokenFileBytes + 1 bytes of `fd`, then strips one trailing "\n".
absl::StatusOr<std::string> ReadToken(int fd, const std::string& what) {
  char buf[kMaxTokenFileBytes + 1];
  size_t got = 0;
  while (got < sizeof(buf)) {
    ssize_t n = read(fd, buf + got, sizeof(buf) - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Refused(what, absl::StrCat("could not be read: ", strerror(errno)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  std::string token(buf, got);
  explicit_bzero(buf, sizeof(buf));
  if (got > kMaxTokenFileBytes) {
    return Refused(what, absl::StrCat("holds more than ", kMaxTokenFileBytes,
                                      " bytes: it is not an enrollment token"));
  }
  if (!token.empty() && token.back() == '\n') token.pop_back();
  if (token.empty()) return Refused(what, "holds no token (it is empty)");
  return token;
}

}  // namespace

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  return ReadTokenFile(path, geteuid(), STDIN_FILENO);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, uid_t euid, int stdin_fd) {
  if (path == "-") return ReadToken(stdin_fd, "standard input");
  if (path.empty()) return Refused("the token file", "is not named (empty path)");
  const std::string what = absl::StrCat("the token file ", path);
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ELOOP) {
      return Refused(what, "is a symbolic link; name the file itself");
    }
    return Refused(what, absl::StrCat("cannot be opened: ", strerror(errno)));
  }
  struct stat st;
  absl::Status refused;
  if (fstat(fd, &st) != 0) {
    refused = Refused(what, absl::StrCat("cannot be examined: ", strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    refused = Refused(what, "is not a regular file");
  } else if ((st.st_mode & 077) != 0) {
    refused = Refused(what, absl::StrFormat("is open to group or others (mode %04o): it must "
                                            "be the owner's alone (chmod 600)",
                                            st.st_mode & 07777));
  } else if (st.st_uid != euid && st.st_uid != 0) {
    refused = Refused(what, absl::StrCat("is owned by uid ", st.st_uid,
                                         ": it must be owned by this user (uid ", euid,
                                         ") or root"));
  }
  if (!refused.ok()) {
    close(fd);
    return refused;
  }
  absl::StatusOr<std::string> token = ReadToken(fd, what);
  close(fd);
  return token;
}

}  // namespace sn

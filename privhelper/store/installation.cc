#include "privhelper/store/installation.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "openssl/rand.h"

namespace sn::privhelper {
namespace {

bool IsCanonicalUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> NewUuidV4() {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof b) != 1) return absl::InternalError("RAND_bytes failed");
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  char out[37];
  snprintf(out, sizeof out,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
  return std::string(out);
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateInstallationId(const std::string& state_dir) {
  const std::string path = absl::StrCat(state_dir, "/", kInstallationFile);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoStatus(errno, absl::StrCat("stat ", path));
    ASSIGN_OR_RETURN(std::string id, NewUuidV4());
    nlohmann::json doc = {{"schema", 1}, {"installation_id", id}};
    RETURN_IF_ERROR(WriteFileAtomically(path, doc.dump() + "\n", 0600));
    return id;
  }
  const std::string refuse =
      absl::StrCat("installation identity ", path, " is unusable and is kept for inspection: ");
  if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != geteuid() ||
      (st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(refuse, "not a private, singly linked regular file owned by this user"));
  }
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, 4096));
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.size() != 2 || !doc.contains("schema") ||
      doc["schema"] != 1 || !doc.contains("installation_id") ||
      !doc["installation_id"].is_string() ||
      !IsCanonicalUuid(doc["installation_id"].get<std::string>())) {
    return absl::FailedPreconditionError(absl::StrCat(refuse, "torn or foreign contents"));
  }
  return doc["installation_id"].get<std::string>();
}

}  // namespace sn::privhelper

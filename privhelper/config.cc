#include "privhelper/config.h"

#include <sys/un.h>
#include <unistd.h>

#include <cerrno>

#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "common/release/ed25519.h"
#include "common/wire/limits.h"
#include "privhelper/store/safe_dir.h"

namespace sn::privhelper {
namespace {

using json = nlohmann::json;

absl::Status MemberError(std::string_view member, std::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("config member \"", absl::string_view(member.data(), member.size()), "\": ",
                   absl::string_view(problem.data(), problem.size())));
}

absl::StatusOr<std::string> AbsolutePath(const json& obj, std::string_view member,
                                         size_t max_len) {
  const json& v = obj.at(std::string(member));
  if (!v.is_string()) return MemberError(member, "must be a string");
  std::string s = v.get<std::string>();
  if (s.empty() || s[0] != '/') return MemberError(member, "must be an absolute path");
  if (s.size() > max_len) {
    return MemberError(member, absl::StrCat("must be at most ", max_len, " bytes"));
  }
  if (s.find('\0') != std::string::npos) return MemberError(member, "must not contain NUL");
  return s;
}

// An optional integer member in [lo, hi]; `*out` keeps its default when absent.
absl::Status OptionalInt(const json& obj, std::string_view member, int64_t lo, int64_t hi,
                         int64_t* out) {
  auto it = obj.find(std::string(member));
  if (it == obj.end()) return absl::OkStatus();
  if (!it->is_number_integer()) return MemberError(member, "must be an integer");
  if (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(hi)
                               : (it->get<int64_t>() < lo || it->get<int64_t>() > hi)) {
    return MemberError(member, absl::StrCat("must be in ", lo, "..", hi));
  }
  const int64_t v = it->is_number_unsigned() ? static_cast<int64_t>(it->get<uint64_t>())
                                             : it->get<int64_t>();
  if (v < lo) return MemberError(member, absl::StrCat("must be in ", lo, "..", hi));
  *out = v;
  return absl::OkStatus();
}

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;
constexpr size_t kMaxPath = 4096;

}  // namespace

absl::StatusOr<Config> ParseConfig(std::string_view json_text) {
  json doc = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("config: not valid JSON");
  if (!doc.is_object()) return absl::InvalidArgumentError("config: must be a JSON object");

  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& k = it.key();
    if (k != "socket" && k != "agent_uid" && k != "state_dir" && k != "provider" &&
        k != "docker_socket" && k != "max_active" && k != "max_retained" &&
        k != "helper_idle_seconds" && k != "max_generations" && k != "release_public_key") {
      return MemberError(k, "unknown member");
    }
  }
  for (const char* required :
       {"socket", "agent_uid", "state_dir", "provider", "release_public_key"}) {
    if (!doc.contains(required)) return MemberError(required, "missing");
  }

  Config c;
  ASSIGN_OR_RETURN(c.socket, AbsolutePath(doc, "socket", kMaxSocketPath));
  ASSIGN_OR_RETURN(c.state_dir, AbsolutePath(doc, "state_dir", kMaxPath));
  if (doc.contains("docker_socket")) {
    ASSIGN_OR_RETURN(c.docker_socket, AbsolutePath(doc, "docker_socket", kMaxSocketPath));
  }

  const json& uid = doc.at("agent_uid");
  // Integers only: 1.0 and "1000" are refused, as are negatives and values beyond uid_t.
  if (!uid.is_number_integer()) return MemberError("agent_uid", "must be an integer");
  if (uid.is_number_unsigned()) {
    uint64_t u = uid.get<uint64_t>();
    // (uid_t)-1 is not a uid: it means "no change" to chown()/setreuid().
    if (u >= std::numeric_limits<uid_t>::max()) return MemberError("agent_uid", "out of range");
    c.agent_uid = static_cast<uid_t>(u);
  } else {
    int64_t i = uid.get<int64_t>();
    if (i < 0 || static_cast<uint64_t>(i) >= std::numeric_limits<uid_t>::max()) {
      return MemberError("agent_uid", "out of range");
    }
    c.agent_uid = static_cast<uid_t>(i);
  }

  const json& provider = doc.at("provider");
  if (!provider.is_string()) return MemberError("provider", "must be a string");
  c.provider = provider.get<std::string>();
  if (c.provider != "docker") return MemberError("provider", "must be \"docker\"");
  RETURN_IF_ERROR(OptionalInt(doc, "max_active", wire::kMinMaxActive, wire::kMaxMaxActive,
                              &c.max_active));
  RETURN_IF_ERROR(OptionalInt(doc, "max_retained", wire::kMinMaxRetained,
                              wire::kMaxMaxRetained, &c.max_retained));
  RETURN_IF_ERROR(OptionalInt(doc, "helper_idle_seconds", 1, kMaxHelperIdleSeconds,
                              &c.helper_idle_seconds));
  RETURN_IF_ERROR(OptionalInt(doc, "max_generations", kMinMaxGenerations, kMaxMaxGenerations,
                              &c.max_generations));
  const json& key = doc.at("release_public_key");
  if (!key.is_string()) return MemberError("release_public_key", "must be a string");
  c.release_public_key = key.get<std::string>();
  if (!release::PublicKey::FromBase64(c.release_public_key).ok()) {
    return MemberError("release_public_key",
                       "must be base64 of a 32-byte Ed25519 public key");
  }
  return c;
}

absl::StatusOr<Config> LoadConfig(const std::string& path) {
  // The trust anchor: only root may have written it (safe_dir.h).
  absl::StatusOr<OwnedFd> fd = OpenTrustedFile(path);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat("config file: ", fd.status().message()));
  }
  std::string text(kMaxConfigBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd->get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, absl::StrCat("read config file ", path));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxConfigBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("config file: ", path, ": larger than ", kMaxConfigBytes, " bytes"));
  }
  text.resize(got);
  return ParseConfig(text);
}

}  // namespace sn::privhelper

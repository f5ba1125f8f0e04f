#include "privhelper/config.h"

#include <sys/un.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/atomic_file.h"
#include "common/json/record.h"
#include "common/status_macros.h"
#include "common/release/ed25519.h"
#include "common/wire/limits.h"
#include "privhelper/store/safe_dir.h"

namespace sn::privhelper {
namespace {

using json::RecordObject;
using json::ValueType;

absl::Status MemberError(std::string_view member, std::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("config member \"", absl::string_view(member.data(), member.size()), "\": ",
                   absl::string_view(problem.data(), problem.size())));
}

absl::StatusOr<std::string> AbsolutePath(RecordObject& obj, std::string_view member,
                                         size_t max_len) {
  absl::StatusOr<std::string> v = obj.String(member);
  if (!v.ok()) return MemberError(member, "must be a string");
  // Read in place (gcc -O2 took a moved-from copy for maybe-uninitialized, failing -c opt).
  const std::string& s = *v;
  if (s.empty() || s[0] != '/') return MemberError(member, "must be an absolute path");
  if (s.size() > max_len) {
    return MemberError(member, absl::StrCat("must be at most ", max_len, " bytes"));
  }
  if (s.find('\0') != std::string::npos) return MemberError(member, "must not contain NUL");
  return *std::move(v);
}

// An integer member in [lo, hi] (JSON integers only: 1.0, 1e3 and "1" are refused).
absl::StatusOr<int64_t> IntIn(RecordObject& obj, std::string_view member, int64_t lo,
                              int64_t hi) {
  if (obj.TypeOf(member) != ValueType::kNumber) return MemberError(member, "must be an integer");
  absl::StatusOr<int64_t> v = obj.Int(member);
  if (!v.ok()) {
    // A number that is not an int64: a fraction, an exponent, -0, or out of range.
    return MemberError(member, "must be an integer in range");
  }
  if (*v < lo || *v > hi) return MemberError(member, absl::StrCat("must be in ", lo, "..", hi));
  return *v;
}

// An optional integer member in [lo, hi]; `*out` keeps its default when absent.
absl::Status OptionalInt(RecordObject& obj, std::string_view member, int64_t lo, int64_t hi,
                         int64_t* out) {
  if (!obj.Has(member)) return absl::OkStatus();
  ASSIGN_OR_RETURN(*out, IntIn(obj, member, lo, hi));
  return absl::OkStatus();
}

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;
constexpr size_t kMaxPath = 4096;
static_assert(kMaxMicrovmStoreDir == 49);

// A uid or gid member: a JSON integer, not negative, below (uid_t)-1, which is not an id: it
// means "no change" to chown()/setreuid().
absl::StatusOr<uint32_t> IdMember(RecordObject& obj, std::string_view member) {
  if (obj.TypeOf(member) != ValueType::kNumber) return MemberError(member, "must be an integer");
  absl::StatusOr<int64_t> id = obj.Int(member);
  if (!id.ok()) return MemberError(member, "must be an integer");
  if (*id < 0 || static_cast<uint64_t>(*id) >= std::numeric_limits<uid_t>::max()) {
    return MemberError(member, "out of range");
  }
  return static_cast<uint32_t>(*id);
}

absl::StatusOr<MicrovmConfig> ParseMicrovmMembers(RecordObject& m, uid_t agent_uid) {
  static constexpr std::string_view kMembers[] = {
      "accel",      "store_dir",  "vm_uid", "vm_gid", "disk_bytes", "free_space_floor_bytes",
      "qemu",       "qemu_img"};
  for (const std::string& k : m.Names()) {
    if (std::find(std::begin(kMembers), std::end(kMembers), k) == std::end(kMembers)) {
      return MemberError(k, "unknown member");
    }
  }
  for (const char* required : {"store_dir", "vm_uid", "vm_gid"}) {
    if (!m.Has(required)) return MemberError(required, "missing");
  }
  MicrovmConfig c;
  if (m.Has("accel")) {
    absl::StatusOr<std::string> accel = m.String("accel");
    if (!accel.ok() || (*accel != "kvm" && *accel != "tcg" && *accel != "auto")) {
      return MemberError("accel", "must be \"kvm\", \"tcg\" or \"auto\"");
    }
    c.accel = *std::move(accel);
  }
  ASSIGN_OR_RETURN(c.store_dir, AbsolutePath(m, "store_dir", kMaxMicrovmStoreDir));
  ASSIGN_OR_RETURN(c.vm_uid, IdMember(m, "vm_uid"));
  ASSIGN_OR_RETURN(c.vm_gid, IdMember(m, "vm_gid"));
  if (c.vm_uid == 0 || c.vm_gid == 0) {
    return MemberError("vm_uid", "qemu never runs as root: vm_uid and vm_gid must not be 0");
  }
  if (c.vm_uid == agent_uid) {
    return MemberError("vm_uid", "must not be the agent's uid");
  }
  RETURN_IF_ERROR(OptionalInt(m, "disk_bytes", kMinMicrovmDiskBytes, kMaxMicrovmDiskBytes,
                              &c.disk_bytes));
  RETURN_IF_ERROR(OptionalInt(m, "free_space_floor_bytes", 0, kMaxMicrovmFreeSpaceFloor,
                              &c.free_space_floor_bytes));
  for (auto [name, out] : {std::pair{"qemu", &c.qemu}, {"qemu_img", &c.qemu_img}}) {
    if (m.Has(name)) {
      ASSIGN_OR_RETURN(*out, AbsolutePath(m, name, kMaxPath));
    }
  }
  RETURN_IF_ERROR(m.Finish());
  return c;
}

// The microvm object's members, their errors naming them as "microvm.<member>".
absl::StatusOr<MicrovmConfig> ParseMicrovm(RecordObject& m, uid_t agent_uid) {
  absl::StatusOr<MicrovmConfig> c = ParseMicrovmMembers(m, agent_uid);
  if (c.ok()) return c;
  return absl::Status(c.status().code(),
                      absl::StrReplaceAll(c.status().message(),
                                          {{"config member \"", "config member \"microvm."}}));
}

}  // namespace

absl::StatusOr<Config> ParseConfig(std::string_view json_text) {
  // The trusted configuration is read like every durable record (common/json/record.h): a
  // member named twice is refused, not resolved to one of its values.
  absl::StatusOr<RecordObject> parsed =
      RecordObject::Parse(json_text, "config", kMaxConfigBytes);
  if (json::IsTornRecord(parsed.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: not one valid JSON object: ", parsed.status().message()));
  }
  if (!parsed.ok()) return parsed.status();  // a duplicated member, named
  RecordObject& doc = *parsed;

  for (const std::string& k : doc.Names()) {
    if (k != "socket" && k != "agent_uid" && k != "state_dir" && k != "provider" &&
        k != "docker_socket" && k != "max_active" && k != "max_retained" &&
        k != "helper_idle_seconds" && k != "max_generations" && k != "release_public_key" &&
        k != "microvm") {
      return MemberError(k, "unknown member");
    }
  }
  for (const char* required :
       {"socket", "agent_uid", "state_dir", "provider", "release_public_key"}) {
    if (!doc.Has(required)) return MemberError(required, "missing");
  }

  Config c;
  ASSIGN_OR_RETURN(c.socket, AbsolutePath(doc, "socket", kMaxSocketPath));
  ASSIGN_OR_RETURN(c.state_dir, AbsolutePath(doc, "state_dir", kMaxPath));
  if (doc.Has("docker_socket")) {
    ASSIGN_OR_RETURN(c.docker_socket, AbsolutePath(doc, "docker_socket", kMaxSocketPath));
  }

  // Integers only: 1.0 and "1000" are refused, as are negatives and values beyond uid_t.
  ASSIGN_OR_RETURN(c.agent_uid, IdMember(doc, "agent_uid"));

  absl::StatusOr<std::string> provider = doc.String("provider");
  if (!provider.ok()) return MemberError("provider", "must be a string");
  c.provider = *std::move(provider);
  if (c.provider != "docker" && c.provider != "microvm") {
    return MemberError("provider", "must be \"docker\" or \"microvm\"");
  }
  if (c.provider == "microvm") {
    if (!doc.Has("microvm")) return MemberError("microvm", "missing (provider is \"microvm\")");
    absl::StatusOr<RecordObject> m = doc.Object("microvm");
    if (!m.ok()) return MemberError("microvm", "must be an object");
    ASSIGN_OR_RETURN(c.microvm, ParseMicrovm(*m, c.agent_uid));
  } else if (doc.Has("microvm")) {
    return MemberError("microvm", "only with provider \"microvm\"");
  }
  RETURN_IF_ERROR(OptionalInt(doc, "max_active", wire::kMinMaxActive, wire::kMaxMaxActive,
                              &c.max_active));
  RETURN_IF_ERROR(OptionalInt(doc, "max_retained", wire::kMinMaxRetained,
                              wire::kMaxMaxRetained, &c.max_retained));
  RETURN_IF_ERROR(OptionalInt(doc, "helper_idle_seconds", 1, kMaxHelperIdleSeconds,
                              &c.helper_idle_seconds));
  RETURN_IF_ERROR(OptionalInt(doc, "max_generations", kMinMaxGenerations, kMaxMaxGenerations,
                              &c.max_generations));
  absl::StatusOr<std::string> key = doc.String("release_public_key");
  if (!key.ok()) return MemberError("release_public_key", "must be a string");
  c.release_public_key = *std::move(key);
  if (!release::PublicKey::FromBase64(c.release_public_key).ok()) {
    return MemberError("release_public_key",
                       "must be base64 of a 32-byte Ed25519 public key");
  }
  RETURN_IF_ERROR(doc.Finish());  // every member was taken above
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

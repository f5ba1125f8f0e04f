#include "privhelper/native/microvm/qemu_seccomp.h"

#include <seccomp.h>
#include <sys/syscall.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"
#include "common/json/record.h"
#include "privhelper/native/seccomp_bpf.h"

namespace sn::microvm {
namespace {

constexpr char kWhat[] = "qemu seccomp policy";

absl::Status Refused(std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(kWhat, ": ", AV(why)));
}

// The x86-64 number of `name`; a refusal for a name libseccomp does not know as one of
// x86-64's (it gives other architectures' calls negative pseudo numbers).
absl::StatusOr<int> Resolve(const std::string& name, size_t index) {
  const int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name.c_str());
  if (nr < 0) {
    return Refused(absl::StrCat("'allow'[", index, "] ", json::QuoteNameForMessage(name),
                                " is not a system call of x86-64"));
  }
  return nr;
}

absl::StatusOr<std::vector<int>> ResolveAll(const std::vector<std::string>& names) {
  if (names.size() > kMaxQemuSeccompCalls) {
    return Refused(absl::StrCat("'allow' names more than ", kMaxQemuSeccompCalls, " calls"));
  }
  std::vector<int> out;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StatusOr<int> nr = Resolve(names[i], i);
    if (!nr.ok()) return nr.status();
    if (std::find(out.begin(), out.end(), *nr) != out.end()) {
      return Refused(absl::StrCat("'allow'[", i, "] ", json::QuoteNameForMessage(names[i]),
                                  " is named twice"));
    }
    out.push_back(*nr);
  }
  if (std::find(out.begin(), out.end(), SYS_execve) == out.end()) {
    return Refused("'allow' must name execve: the policy is loaded before qemu's execve");
  }
  return out;
}

}  // namespace

absl::StatusOr<QemuSeccompPolicy> ParseQemuSeccompPolicy(std::string_view text) {
  if (text.size() > kMaxQemuSeccompBytes) {
    return Refused(absl::StrCat("larger than ", kMaxQemuSeccompBytes, " bytes"));
  }
  absl::StatusOr<json::RecordObject> doc =
      json::RecordObject::Parse(text, kWhat, kMaxQemuSeccompBytes);
  // Torn (not one JSON object) and malformed alike: the policy is refused.
  if (!doc.ok()) return json::Recoded(doc.status(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> format = doc->String("format");
  if (!format.ok()) return format.status();
  if (*format != kQemuSeccompFormat) {
    return doc->MemberMalformed("format", absl::StrCat("is not \"", AV(kQemuSeccompFormat), "\""));
  }
  absl::StatusOr<std::vector<std::string>> names = doc->Strings("allow");
  if (!names.ok()) return names.status();
  if (absl::Status s = doc->Finish(); !s.ok()) return s;
  absl::StatusOr<std::vector<int>> allowed = ResolveAll(*names);
  if (!allowed.ok()) return allowed.status();
  return QemuSeccompPolicy{*std::move(allowed)};
}

absl::StatusOr<std::vector<sock_filter>> CompileQemuSeccompPolicy(const QemuSeccompPolicy& p) {
  native::SeccompCtx ctx(seccomp_init(SCMP_ACT_KILL_PROCESS));
  if (ctx == nullptr) return absl::InternalError("seccomp_init failed");
  // Another ABI (x32, i386 through int 0x80) is never qemu's: kill, like any unlisted call.
  if (seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) != 0) {
    return absl::InternalError("seccomp: bad-arch action");
  }
  for (int nr : p.allowed) {
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 0); rc != 0) {
      return absl::InternalError(absl::StrCat("seccomp rule for system call ", nr, ": ",
                                              strerror(-rc)));
    }
  }
  return native::ExportFilterProgram(ctx.get());
}

absl::StatusOr<std::vector<sock_filter>> ReadQemuSeccompPolicy(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, kMaxQemuSeccompBytes);
  if (!text.ok()) return text.status();  // its message names the path
  absl::StatusOr<QemuSeccompPolicy> policy = ParseQemuSeccompPolicy(*text);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", policy.status().message()));
  }
  return CompileQemuSeccompPolicy(*policy);
}

}  // namespace sn::microvm

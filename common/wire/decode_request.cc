// Decoder of the request frame (spec/wire.md §4) and of each operation's arguments (§5).
#include <cstdint>
#include <string_view>

#include "common/wire/argument_rules.h"
#include "common/wire/decoders.h"
#include "common/wire/limits.h"
#include "common/wire/validate.h"

namespace sn::wire::internal {
namespace {

using json::Reader;

// An int64 that must satisfy `rule` (argument_rules.h); [lo, hi] only names the range in the
// reason.
absl::StatusOr<int64_t> ReadRuleInt(Reader& r, const Path& p, bool (*rule)(int64_t), int64_t lo,
                                    int64_t hi) {
  ASSIGN_OR_RETURN(int64_t v, ReadInt64(r, p));
  if (!rule(v)) {
    return Invalid(p, "out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

// A string that must satisfy `rule`; `limit` names the length bound in the reason.
absl::StatusOr<std::string> ReadRuleString(Reader& r, const Path& p,
                                           bool (*rule)(std::string_view), size_t limit) {
  ASSIGN_OR_RETURN(std::string_view s, ReadString(r, p));
  if (!rule(s)) return Invalid(p, "longer than " + std::to_string(limit) + " bytes");
  return std::string(s);
}

absl::StatusOr<std::string> ReadId(Reader& r, const Path& p, bool (*rule)(std::string_view)) {
  ASSIGN_OR_RETURN(std::string_view s, ReadString(r, p));
  if (!rule(s)) return Invalid(p, "not a canonical lowercase uuid");
  return std::string(s);
}

absl::StatusOr<std::string> ReadSandboxId(Reader& r, const Path& p) {
  return ReadId(r, p, rules::SandboxId);
}

absl::StatusOr<std::string> ReadPath(Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(std::string_view s, ReadString(r, p));
  if (!rules::FilePath(s)) {
    return Invalid(p, "not an absolute path of at most 4096 bytes without empty, '.' or '..' "
                      "components");
  }
  return std::string(s);
}

absl::Status ReadStringArray(Reader& r, const Path& p, size_t min, size_t max,
                             bool (*rule)(std::string_view), std::vector<std::string>* out) {
  return ForEachElement(r, p, min, max, [&](Reader& e, const Path& ep) -> absl::Status {
    ASSIGN_OR_RETURN(std::string s, ReadRuleString(e, ep, rule, kMaxArgBytes));
    out->push_back(std::move(s));
    return absl::OkStatus();
  });
}

absl::Status ReadEnv(Reader& r, const Path& p,
                     std::vector<std::pair<std::string, std::string>>* out) {
  RETURN_IF_ERROR(ExpectType(r, p, json::ValueType::kObject));
  RETURN_IF_ERROR(r.BeginObject());
  while (true) {
    std::string_view name;
    ASSIGN_OR_RETURN(bool more, r.NextMember(&name));
    if (!more) return absl::OkStatus();
    if (!rules::EnvCount(out->size() + 1)) {
      return Invalid(p, "more than " + std::to_string(kMaxEnvEntries) + " entries");
    }
    if (!rules::EnvKey(name)) return Invalid(p, "a key is not [A-Za-z_][A-Za-z0-9_]{0,255}");
    std::string key(name);
    ASSIGN_OR_RETURN(json::ValueType t, r.Peek());
    if (t == json::ValueType::kNull) return Invalid(p, "an entry's value is null");
    if (t != json::ValueType::kString) return Invalid(p, "an entry's value is not a string");
    ASSIGN_OR_RETURN(std::string_view value, r.String());
    if (!rules::EnvValue(value)) {
      return Invalid(p, "an entry's value is longer than " + std::to_string(kMaxEnvValueBytes) +
                            " bytes");
    }
    out->emplace_back(std::move(key), std::string(value));
  }
}

absl::StatusOr<Arguments> DecodeCreateArgs(Reader& r, const Path& p) {
  static constexpr std::string_view kNames[] = {"sandbox_id", "image",      "command",
                                                "env",        "cpu_millis", "memory_bytes"};
  MemberTable t(p, kNames);
  CreateArgs a;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp)); break; }
      case 1: { ASSIGN_OR_RETURN(a.image, ReadRuleString(v, mp, rules::ImageName, kMaxImageNameBytes)); break; }
      case 2: a.command.emplace(); return ReadStringArray(v, mp, 0, kMaxCommandArgs, rules::CommandArg, &*a.command);
      case 3: a.env.emplace(); return ReadEnv(v, mp, &*a.env);
      case 4: { ASSIGN_OR_RETURN(a.cpu_millis, ReadRuleInt(v, mp, rules::CpuMillis, kMinCpuMillis, kMaxCpuMillis)); break; }
      default: { ASSIGN_OR_RETURN(a.memory_bytes, ReadRuleInt(v, mp, rules::MemoryBytes, kMinMemoryBytes, kMaxMemoryBytes)); }
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 1, 4, 5}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeResumeArgs(Reader& r, const Path& p) {
  static constexpr std::string_view kNames[] = {"sandbox_id", "reconciliation_only"};
  MemberTable t(p, kNames);
  ResumeArgs a;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    if (i == 0) {
      ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp));
    } else {
      ASSIGN_OR_RETURN(a.reconciliation_only, ReadBool(v, mp));
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 1}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeSandboxArgs(Reader& r, const Path& p) {
  static constexpr std::string_view kNames[] = {"sandbox_id"};
  MemberTable t(p, kNames);
  SandboxArgs a;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int, Reader& v, const Path& mp) -> absl::Status {
    ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp));
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeExecArgs(Reader& r, const Path& p) {
  static constexpr std::string_view kNames[] = {"sandbox_id", "argv", "stdin",
                                                "output_limit_bytes"};
  MemberTable t(p, kNames);
  ExecArgs a;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp)); break; }
      case 1: return ReadStringArray(v, mp, kMinExecArgv, kMaxExecArgv, rules::ArgvArg, &a.argv);
      case 2: a.stdin_bytes.emplace(); return ReadBase64(v, mp, kMaxStdinBytes, &*a.stdin_bytes);
      default: { ASSIGN_OR_RETURN(a.output_limit_bytes, ReadRuleInt(v, mp, rules::OutputLimitBytes, 0, kMaxOutputLimitBytes)); }
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 1, 3}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeWriteFileArgs(Reader& r, const Path& p) {
  static constexpr std::string_view kNames[] = {"sandbox_id", "path", "content", "mode"};
  MemberTable t(p, kNames);
  WriteFileArgs a;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp)); break; }
      case 1: { ASSIGN_OR_RETURN(a.path, ReadPath(v, mp)); break; }
      case 2: return ReadBase64(v, mp, kMaxFileContentBytes, &a.content);
      default: { ASSIGN_OR_RETURN(a.mode, ReadRuleInt(v, mp, rules::FileMode, 0, kMaxFileMode)); }
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 1, 2, 3}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeReadFileArgs(Reader& r, const Path& p) {
  static constexpr std::string_view kNames[] = {"sandbox_id", "path", "max_bytes"};
  MemberTable t(p, kNames);
  ReadFileArgs a;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp)); break; }
      case 1: { ASSIGN_OR_RETURN(a.path, ReadPath(v, mp)); break; }
      default: { ASSIGN_OR_RETURN(a.max_bytes, ReadRuleInt(v, mp, rules::ReadMaxBytes, 0, kMaxReadFileBytes)); }
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 1, 2}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeObserveArgs(Reader& r, const Path& p) {
  static constexpr std::string_view kNames[] = {"operation_id"};
  MemberTable t(p, kNames);
  ObserveArgs a;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int, Reader& v, const Path& mp) -> absl::Status {
    ASSIGN_OR_RETURN(a.operation_id, ReadId(v, mp, rules::OperationId));
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0}));
  return Arguments(std::move(a));
}

}  // namespace

// One decoder per argument shape above (Decode<Args>Args); the dispatch is the table's.
absl::StatusOr<Arguments> DecodeArguments(Operation op, Reader& r, const Path& p) {
  switch (op) {
#define SN_OPERATION(e, field, args, result, mutation, slot) \
  case Operation::k##e: return Decode##args##Args(r, p);
#define SN_AGENT_OPERATION SN_OPERATION
#include "common/operations.def"
  }
  return Invalid(p, "unknown operation");
}

absl::StatusOr<Request> DecodeRequest(const std::vector<RawMember>& m) {
  static constexpr std::string_view kNames[] = {
      "type",       "version",   "id",         "connection_id", "owner_epoch",
      "sequence",   "generation", "operation", "timeout_ms",    "arguments"};
  const Path p = Root("request");
  MemberTable t(p, kNames);
  Request req;
  std::string_view args_raw;
  // Layer 1, the envelope: every member present, of its JSON type; ids and counters exact.
  RETURN_IF_ERROR(ForEachRawMember(m, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 2: { ASSIGN_OR_RETURN(req.id, ReadUuid(v, mp)); break; }
      case 3: { ASSIGN_OR_RETURN(req.connection_id, ReadUuid(v, mp)); break; }
      case 4: { ASSIGN_OR_RETURN(req.owner_epoch, ReadPositive(v, mp)); break; }
      case 5: { ASSIGN_OR_RETURN(req.sequence, ReadPositive(v, mp)); break; }
      case 6: { ASSIGN_OR_RETURN(req.generation, ReadInt64(v, mp)); break; }
      case 7: {
        ASSIGN_OR_RETURN(std::string_view name, ReadString(v, mp));
        req.operation_name = std::string(name);
        break;
      }
      case 8: { ASSIGN_OR_RETURN(req.timeout_ms, ReadInt64(v, mp)); break; }
      case 9: return ExpectType(v, mp, json::ValueType::kObject);
      default: break;
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  for (const RawMember& rm : m) {
    if (rm.name == "arguments") args_raw = rm.raw;
  }
  // Layer 2, the request: failures earn an `invalid` response.
  std::optional<Operation> op = ParseOperation(req.operation_name);
  if (!op) {
    req.request_error = "request.operation: unknown operation";
    return req;
  }
  req.operation = *op;
  if (!rules::Generation(req.generation)) {
    req.request_error = "request.generation: not a positive int64";
    return req;
  }
  if (!rules::TimeoutMs(req.timeout_ms)) {
    req.request_error = "request.timeout_ms: out of range [" + std::to_string(kMinTimeoutMs) +
                        ", " + std::to_string(kMaxTimeoutMs) + "]";
    return req;
  }
  Reader ar(args_raw, /*base_depth=*/1);
  const Path ap = p.Member("arguments");
  absl::StatusOr<Arguments> args = DecodeArguments(*op, ar, ap);
  if (!args.ok()) {
    req.request_error = std::string(args.status().message());
    return req;
  }
  req.args = std::move(*args);
  return req;
}

}  // namespace sn::wire::internal

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

// The members of each object, in the order of spec/wire.md §4-§5 (the order only decides the
// order in which missing members are listed).
#define SN_CREATE_ARGS_MEMBERS(M)                                                        \
  M(kSandboxId, "sandbox_id") M(kImage, "image") M(kCommand, "command") M(kEnv, "env")   \
  M(kCpuMillis, "cpu_millis") M(kMemoryBytes, "memory_bytes")
SN_WIRE_MEMBERS(CreateArgsMember, SN_CREATE_ARGS_MEMBERS)

#define SN_RESUME_ARGS_MEMBERS(M) \
  M(kSandboxId, "sandbox_id") M(kReconciliationOnly, "reconciliation_only")
SN_WIRE_MEMBERS(ResumeArgsMember, SN_RESUME_ARGS_MEMBERS)

// kill, kill_compute, delete_retained, inspect.
#define SN_SANDBOX_ARGS_MEMBERS(M) M(kSandboxId, "sandbox_id")
SN_WIRE_MEMBERS(SandboxArgsMember, SN_SANDBOX_ARGS_MEMBERS)

#define SN_EXEC_ARGS_MEMBERS(M)                                                          \
  M(kSandboxId, "sandbox_id") M(kArgv, "argv") M(kStdin, "stdin")                        \
  M(kOutputLimitBytes, "output_limit_bytes")
SN_WIRE_MEMBERS(ExecArgsMember, SN_EXEC_ARGS_MEMBERS)

#define SN_WRITE_FILE_ARGS_MEMBERS(M) \
  M(kSandboxId, "sandbox_id") M(kPath, "path") M(kContent, "content") M(kMode, "mode")
SN_WIRE_MEMBERS(WriteFileArgsMember, SN_WRITE_FILE_ARGS_MEMBERS)

#define SN_READ_FILE_ARGS_MEMBERS(M) \
  M(kSandboxId, "sandbox_id") M(kPath, "path") M(kMaxBytes, "max_bytes")
SN_WIRE_MEMBERS(ReadFileArgsMember, SN_READ_FILE_ARGS_MEMBERS)

#define SN_OBSERVE_ARGS_MEMBERS(M) M(kOperationId, "operation_id")
SN_WIRE_MEMBERS(ObserveArgsMember, SN_OBSERVE_ARGS_MEMBERS)

// The request frame's members; codec.cc checks `type` and `version`, DecodeRequest requires
// them too.
#define SN_REQUEST_MEMBERS(M)                                                            \
  M(kType, "type") M(kVersion, "version") M(kId, "id") M(kConnectionId, "connection_id") \
  M(kOwnerEpoch, "owner_epoch") M(kSequence, "sequence") M(kGeneration, "generation")    \
  M(kOperation, "operation") M(kTimeoutMs, "timeout_ms") M(kArguments, "arguments")
SN_WIRE_MEMBERS(RequestMember, SN_REQUEST_MEMBERS)

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
  using enum CreateArgsMember;
  Members<CreateArgsMember> t(p);
  CreateArgs a;
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](CreateArgsMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kSandboxId: {
            ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp));
            break;
          }
          case kImage: {
            ASSIGN_OR_RETURN(a.image,
                             ReadRuleString(v, mp, rules::ImageName, kMaxImageNameBytes));
            break;
          }
          case kCommand:
            a.command.emplace();
            return ReadStringArray(v, mp, 0, kMaxCommandArgs, rules::CommandArg, &*a.command);
          case kEnv: a.env.emplace(); return ReadEnv(v, mp, &*a.env);
          case kCpuMillis: {
            ASSIGN_OR_RETURN(a.cpu_millis, ReadRuleInt(v, mp, rules::CpuMillis, kMinCpuMillis,
                                                       kMaxCpuMillis));
            break;
          }
          case kMemoryBytes: {
            ASSIGN_OR_RETURN(a.memory_bytes, ReadRuleInt(v, mp, rules::MemoryBytes,
                                                         kMinMemoryBytes, kMaxMemoryBytes));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kSandboxId, kImage, kCpuMillis, kMemoryBytes}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeResumeArgs(Reader& r, const Path& p) {
  using enum ResumeArgsMember;
  Members<ResumeArgsMember> t(p);
  ResumeArgs a;
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](ResumeArgsMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kSandboxId: {
            ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp));
            break;
          }
          case kReconciliationOnly: {
            ASSIGN_OR_RETURN(a.reconciliation_only, ReadBool(v, mp));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kSandboxId, kReconciliationOnly}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeSandboxArgs(Reader& r, const Path& p) {
  using enum SandboxArgsMember;
  Members<SandboxArgsMember> t(p);
  SandboxArgs a;
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](SandboxArgsMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kSandboxId: {
            ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kSandboxId}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeExecArgs(Reader& r, const Path& p) {
  using enum ExecArgsMember;
  Members<ExecArgsMember> t(p);
  ExecArgs a;
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](ExecArgsMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kSandboxId: {
            ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp));
            break;
          }
          case kArgv:
            return ReadStringArray(v, mp, kMinExecArgv, kMaxExecArgv, rules::ArgvArg, &a.argv);
          case kStdin:
            a.stdin_bytes.emplace();
            return ReadBase64(v, mp, kMaxStdinBytes, &*a.stdin_bytes);
          case kOutputLimitBytes: {
            ASSIGN_OR_RETURN(a.output_limit_bytes, ReadRuleInt(v, mp, rules::OutputLimitBytes, 0,
                                                               kMaxOutputLimitBytes));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kSandboxId, kArgv, kOutputLimitBytes}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeWriteFileArgs(Reader& r, const Path& p) {
  using enum WriteFileArgsMember;
  Members<WriteFileArgsMember> t(p);
  WriteFileArgs a;
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](WriteFileArgsMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kSandboxId: {
            ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp));
            break;
          }
          case kPath: {
            ASSIGN_OR_RETURN(a.path, ReadPath(v, mp));
            break;
          }
          case kContent: return ReadBase64(v, mp, kMaxFileContentBytes, &a.content);
          case kMode: {
            ASSIGN_OR_RETURN(a.mode, ReadRuleInt(v, mp, rules::FileMode, 0, kMaxFileMode));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kSandboxId, kPath, kContent, kMode}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeReadFileArgs(Reader& r, const Path& p) {
  using enum ReadFileArgsMember;
  Members<ReadFileArgsMember> t(p);
  ReadFileArgs a;
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](ReadFileArgsMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kSandboxId: {
            ASSIGN_OR_RETURN(a.sandbox_id, ReadSandboxId(v, mp));
            break;
          }
          case kPath: {
            ASSIGN_OR_RETURN(a.path, ReadPath(v, mp));
            break;
          }
          case kMaxBytes: {
            ASSIGN_OR_RETURN(a.max_bytes,
                             ReadRuleInt(v, mp, rules::ReadMaxBytes, 0, kMaxReadFileBytes));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kSandboxId, kPath, kMaxBytes}));
  return Arguments(std::move(a));
}

absl::StatusOr<Arguments> DecodeObserveArgs(Reader& r, const Path& p) {
  using enum ObserveArgsMember;
  Members<ObserveArgsMember> t(p);
  ObserveArgs a;
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](ObserveArgsMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kOperationId: {
            ASSIGN_OR_RETURN(a.operation_id, ReadId(v, mp, rules::OperationId));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kOperationId}));
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
  using enum RequestMember;
  const Path p = Root("request");
  Members<RequestMember> t(p);
  Request req;
  std::string_view args_raw;
  // Layer 1, the envelope: every member present, of its JSON type; ids and counters exact.
  RETURN_IF_ERROR(ForEachRawMember(
      m, p, t, [&](RequestMember member, Reader& v, const Path& mp) -> absl::Status {
        switch (member) {
          case kType:
          case kVersion: break;
          case kId: {
            ASSIGN_OR_RETURN(req.id, ReadUuid(v, mp));
            break;
          }
          case kConnectionId: {
            ASSIGN_OR_RETURN(req.connection_id, ReadUuid(v, mp));
            break;
          }
          case kOwnerEpoch: {
            ASSIGN_OR_RETURN(req.owner_epoch, ReadPositive(v, mp));
            break;
          }
          case kSequence: {
            ASSIGN_OR_RETURN(req.sequence, ReadPositive(v, mp));
            break;
          }
          case kGeneration: {
            ASSIGN_OR_RETURN(req.generation, ReadInt64(v, mp));
            break;
          }
          case kOperation: {
            ASSIGN_OR_RETURN(std::string_view name, ReadString(v, mp));
            req.operation_name = std::string(name);
            break;
          }
          case kTimeoutMs: {
            ASSIGN_OR_RETURN(req.timeout_ms, ReadInt64(v, mp));
            break;
          }
          case kArguments: return ExpectType(v, mp, json::ValueType::kObject);
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kType, kVersion, kId, kConnectionId, kOwnerEpoch, kSequence,
                             kGeneration, kOperation, kTimeoutMs, kArguments}));
  for (const RawMember& rm : m) {
    if (rm.name == t.name(kArguments)) args_raw = rm.raw;
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
  const Path ap = p.Member(t.name(kArguments));
  absl::StatusOr<Arguments> args = DecodeArguments(*op, ar, ap);
  if (!args.ok()) {
    req.request_error = std::string(args.status().message());
    return req;
  }
  req.args = std::move(*args);
  return req;
}

}  // namespace sn::wire::internal

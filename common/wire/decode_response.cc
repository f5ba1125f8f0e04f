// Decoders of the response frame, operation results and recorded responses (spec/wire.md §5).
#include <cstdint>
#include <string_view>

#include "common/wire/decoders.h"
#include "common/wire/limits.h"

namespace sn::wire::internal {
namespace {

using json::Reader;

constexpr std::string_view kErrorCodes[] = {"invalid",  "unsupported", "capacity",
                                            "conflict", "not_found",   "failed",
                                            "unconfirmed", "unavailable", "uncertain"};
constexpr std::string_view kSandboxStates[] = {"running", "retained", "absent"};

// The members of each object, in the order of spec/wire.md §5 (the order only decides the
// order in which missing members are listed).
#define SN_SETTLED_MEMBERS(M)                                                            \
  M(kRequestId, "request_id") M(kSandboxId, "sandbox_id") M(kNativeId, "native_id")      \
  M(kGeneration, "generation") M(kSpecificationDigest, "specification_digest")
SN_WIRE_MEMBERS(SettledMember, SN_SETTLED_MEMBERS)

#define SN_INFO_MEMBERS(M) M(kCreateSettled, "create_settled")
SN_WIRE_MEMBERS(InfoMember, SN_INFO_MEMBERS)

#define SN_UNSUPPORTED_MEMBERS(M) M(kOperation, "operation") M(kReason, "reason")
SN_WIRE_MEMBERS(UnsupportedMember, SN_UNSUPPORTED_MEMBERS)

// create, resume and inspect.
#define SN_SANDBOX_RESULT_MEMBERS(M) \
  M(kSandboxId, "sandbox_id") M(kNativeId, "native_id") M(kState, "state")
SN_WIRE_MEMBERS(SandboxResultMember, SN_SANDBOX_RESULT_MEMBERS)

#define SN_EXEC_RESULT_MEMBERS(M) \
  M(kExitCode, "exit_code") M(kStdout, "stdout") M(kStderr, "stderr") M(kTruncated, "truncated")
SN_WIRE_MEMBERS(ExecResultMember, SN_EXEC_RESULT_MEMBERS)

#define SN_WRITE_FILE_RESULT_MEMBERS(M) M(kSize, "size")
SN_WIRE_MEMBERS(WriteFileResultMember, SN_WRITE_FILE_RESULT_MEMBERS)

#define SN_READ_FILE_RESULT_MEMBERS(M) \
  M(kContent, "content") M(kSize, "size") M(kTruncated, "truncated")
SN_WIRE_MEMBERS(ReadFileResultMember, SN_READ_FILE_RESULT_MEMBERS)

#define SN_OBSERVE_RESULT_MEMBERS(M)                                                     \
  M(kOperationId, "operation_id") M(kOperation, "operation") M(kState, "state")          \
  M(kResponse, "response")
SN_WIRE_MEMBERS(ObserveResultMember, SN_OBSERVE_RESULT_MEMBERS)

#define SN_RECORDED_MEMBERS(M)                                                           \
  M(kId, "id") M(kResult, "result") M(kErrorCode, "error_code") M(kInfo, "info")         \
  M(kUnsupported, "unsupported")
SN_WIRE_MEMBERS(RecordedMember, SN_RECORDED_MEMBERS)

// The response frame's members; codec.cc checks `type` and `version`, DecodeResponse accepts
// them.
#define SN_RESPONSE_MEMBERS(M)                                                           \
  M(kType, "type") M(kVersion, "version") M(kId, "id") M(kConnectionId, "connection_id") \
  M(kResult, "result") M(kErrorCode, "error_code") M(kInfo, "info")                      \
  M(kUnsupported, "unsupported")
SN_WIRE_MEMBERS(ResponseMember, SN_RESPONSE_MEMBERS)

absl::StatusOr<std::string> ReadErrorCode(Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(int i, ReadEnum(r, p, kErrorCodes));
  return std::string(kErrorCodes[i]);
}

absl::Status DecodeSettled(Reader& r, const Path& p, CreateSettled* c) {
  using enum SettledMember;
  Members<SettledMember> t(p);
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](SettledMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kRequestId: {
            ASSIGN_OR_RETURN(c->request_id, ReadUuid(v, mp));
            break;
          }
          case kSandboxId: {
            ASSIGN_OR_RETURN(c->sandbox_id, ReadUuid(v, mp));
            break;
          }
          case kNativeId: {
            ASSIGN_OR_RETURN(c->native_id, ReadBoundedString(v, mp, kMaxNativeIdBytes));
            break;
          }
          case kGeneration: {
            ASSIGN_OR_RETURN(c->generation, ReadPositive(v, mp));
            break;
          }
          case kSpecificationDigest: {
            ASSIGN_OR_RETURN(c->specification_digest, ReadDigest(v, mp));
            break;
          }
        }
        return absl::OkStatus();
      }));
  return t.Require({kRequestId, kSandboxId, kNativeId, kGeneration, kSpecificationDigest});
}

absl::Status DecodeInfo(Reader& r, const Path& p, std::optional<CreateSettled>* out) {
  using enum InfoMember;
  Members<InfoMember> t(p);
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](InfoMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kCreateSettled: out->emplace(); return DecodeSettled(v, mp, &**out);
        }
        return absl::OkStatus();
      }));
  return t.Require({kCreateSettled});
}

absl::Status DecodeUnsupported(Reader& r, const Path& p, std::optional<Unsupported>* out) {
  using enum UnsupportedMember;
  Members<UnsupportedMember> t(p);
  Unsupported u;
  RETURN_IF_ERROR(ForEachMember(
      r, p, t, [&](UnsupportedMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kOperation: {
            ASSIGN_OR_RETURN(std::string_view s, ReadString(v, mp));
            u.operation = std::string(s);
            break;
          }
          case kReason: {
            ASSIGN_OR_RETURN(u.reason, ReadBoundedString(v, mp, kMaxUnsupportedReasonBytes));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kOperation, kReason}));
  *out = std::move(u);
  return absl::OkStatus();
}

// The cross-member rules shared by a response and a recorded response.
absl::Status CheckOutcome(const Path& p, bool has_result, const std::optional<std::string>& code,
                          bool has_info, bool has_unsupported) {
  if (has_result && code) return Invalid(p, "result and error_code must not appear together");
  if (has_info && code != "failed") return Invalid(p, "info is allowed only with error_code \"failed\"");
  if (has_unsupported && code != "unsupported") {
    return Invalid(p, "unsupported is allowed only with error_code \"unsupported\"");
  }
  return absl::OkStatus();
}

absl::StatusOr<Result> DecodeSandboxResult(Operation op, Reader& r, const Path& p) {
  using enum SandboxResultMember;
  Members<SandboxResultMember> t(p);
  std::string sandbox_id;
  std::optional<std::string> native_id;
  int state = 0;
  RETURN_IF_ERROR(ForEachMember(
      r, p, t, [&](SandboxResultMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kSandboxId: {
            ASSIGN_OR_RETURN(sandbox_id, ReadUuid(v, mp));
            break;
          }
          case kNativeId: {
            ASSIGN_OR_RETURN(native_id, ReadBoundedString(v, mp, kMaxNativeIdBytes));
            break;
          }
          case kState: {
            ASSIGN_OR_RETURN(state, ReadEnum(v, mp, kSandboxStates));
            break;
          }
        }
        return absl::OkStatus();
      }));
  const SandboxState s = static_cast<SandboxState>(state);
  if (op == Operation::kInspect) {
    RETURN_IF_ERROR(t.Require({kSandboxId, kState}));
    if ((s != SandboxState::kAbsent) != native_id.has_value()) {
      return Invalid(p, "native_id must be present exactly when state is not \"absent\"");
    }
    return Result(InspectResult{std::move(sandbox_id), s, std::move(native_id)});
  }
  RETURN_IF_ERROR(t.Require({kSandboxId, kNativeId, kState}));
  const Path sp = p.Member(t.name(kState));
  if (op == Operation::kCreate) {
    if (s != SandboxState::kRunning) return Invalid(sp, "must be \"running\"");
    return Result(CreateResult{std::move(sandbox_id), std::move(*native_id)});
  }
  if (s == SandboxState::kAbsent) return Invalid(sp, "must be \"running\" or \"retained\"");
  return Result(ResumeResult{std::move(sandbox_id), std::move(*native_id), s});
}

// One decoder per result shape (Decode<Result>Result); create, resume and inspect share the
// wire's sandbox object.
absl::StatusOr<Result> DecodeCreateResult(Reader& r, const Path& p) {
  return DecodeSandboxResult(Operation::kCreate, r, p);
}
absl::StatusOr<Result> DecodeResumeResult(Reader& r, const Path& p) {
  return DecodeSandboxResult(Operation::kResume, r, p);
}
absl::StatusOr<Result> DecodeInspectResult(Reader& r, const Path& p) {
  return DecodeSandboxResult(Operation::kInspect, r, p);
}
absl::StatusOr<Result> DecodeNoneResult(Reader&, const Path& p) {
  return Invalid(p, "this operation has no result");
}

absl::StatusOr<Result> DecodeExecResult(Reader& r, const Path& p) {
  using enum ExecResultMember;
  Members<ExecResultMember> t(p);
  ExecResult e;
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](ExecResultMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kExitCode: {
            ASSIGN_OR_RETURN(e.exit_code, ReadInt64(v, mp));
            break;
          }
          case kStdout:
            return ReadBase64(v, mp, static_cast<size_t>(kMaxOutputLimitBytes), &e.stdout_bytes);
          case kStderr:
            return ReadBase64(v, mp, static_cast<size_t>(kMaxOutputLimitBytes), &e.stderr_bytes);
          case kTruncated: {
            ASSIGN_OR_RETURN(e.truncated, ReadBool(v, mp));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kExitCode, kStdout, kStderr, kTruncated}));
  if (e.stdout_bytes.size() + e.stderr_bytes.size() > static_cast<size_t>(kMaxOutputLimitBytes)) {
    return Invalid(p, "stdout and stderr together exceed the output limit");
  }
  return Result(std::move(e));
}

absl::StatusOr<Result> DecodeWriteFileResult(Reader& r, const Path& p) {
  using enum WriteFileResultMember;
  Members<WriteFileResultMember> t(p);
  WriteFileResult w;
  RETURN_IF_ERROR(ForEachMember(
      r, p, t, [&](WriteFileResultMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kSize: {
            ASSIGN_OR_RETURN(w.size, ReadInt64InRange(v, mp, 0, INT64_MAX));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kSize}));
  return Result(w);
}

absl::StatusOr<Result> DecodeReadFileResult(Reader& r, const Path& p) {
  using enum ReadFileResultMember;
  Members<ReadFileResultMember> t(p);
  ReadFileResult f;
  RETURN_IF_ERROR(ForEachMember(
      r, p, t, [&](ReadFileResultMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kContent:
            return ReadBase64(v, mp, static_cast<size_t>(kMaxReadFileBytes), &f.content);
          case kSize: {
            ASSIGN_OR_RETURN(f.size, ReadInt64InRange(v, mp, 0, INT64_MAX));
            break;
          }
          case kTruncated: {
            ASSIGN_OR_RETURN(f.truncated, ReadBool(v, mp));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kContent, kSize, kTruncated}));
  const uint64_t size = static_cast<uint64_t>(f.size);
  if (f.content.size() > size || f.truncated != (size > f.content.size())) {
    return Invalid(p, "content, size and truncated disagree");
  }
  return Result(std::move(f));
}

absl::StatusOr<Result> DecodeObserveResult(Reader& r, const Path& p) {
  using enum ObserveResultMember;
  static constexpr std::string_view kStates[] = {"queued", "running", "completed", "unknown"};
  Members<ObserveResultMember> t(p);
  ObserveResult o;
  std::string_view response_raw;
  int response_depth = 0;
  RETURN_IF_ERROR(ForEachMember(
      r, p, t, [&](ObserveResultMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kOperationId: {
            ASSIGN_OR_RETURN(o.operation_id, ReadUuid(v, mp));
            break;
          }
          case kOperation: {
            ASSIGN_OR_RETURN(std::string_view s, ReadString(v, mp));
            o.operation = std::string(s);
            break;
          }
          case kState: {
            ASSIGN_OR_RETURN(int s, ReadEnum(v, mp, kStates));
            o.state = static_cast<ObserveState>(s);
            break;
          }
          case kResponse: {
            RETURN_IF_ERROR(ExpectType(v, mp, json::ValueType::kObject));
            response_depth = v.depth();
            ASSIGN_OR_RETURN(response_raw, v.Capture());
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kOperationId, kState}));
  const bool unknown = o.state == ObserveState::kUnknown;
  if (unknown == t.Has(kOperation)) {
    return Invalid(p, "operation must be present exactly when state is not \"unknown\"");
  }
  if ((o.state == ObserveState::kCompleted) != t.Has(kResponse)) {
    return Invalid(p, "response must be present exactly when state is \"completed\"");
  }
  std::optional<Operation> op;
  if (o.operation) {
    op = ParseOperation(*o.operation);
    if (!op || !IsMutation(*op)) {
      return Invalid(p.Member(t.name(kOperation)), "not a mutation operation");
    }
  }
  if (t.Has(kResponse)) {
    Reader rr(response_raw, response_depth);
    const Path rp = p.Member(t.name(kResponse));
    ASSIGN_OR_RETURN(RecordedResponse rec, DecodeRecordedAt(op, rr, rp));
    o.response = std::move(rec);
  }
  return Result(std::move(o));
}

std::optional<MutationResult> ToMutationResult(Result r) {
  if (auto* c = std::get_if<CreateResult>(&r)) return MutationResult(std::move(*c));
  if (auto* c = std::get_if<ResumeResult>(&r)) return MutationResult(std::move(*c));
  if (auto* c = std::get_if<ExecResult>(&r)) return MutationResult(std::move(*c));
  if (auto* c = std::get_if<WriteFileResult>(&r)) return MutationResult(std::move(*c));
  return std::nullopt;
}

// Infers a recorded result's operation from its shape, trying every mutation with a result in
// table order; create (first in the table) wins over resume for {sandbox_id, native_id, state:
// "running"} (the two are identical on the wire). The other shapes have distinct members.
absl::StatusOr<MutationResult> InferMutationResult(std::string_view raw, int depth, const Path& p) {
  for (const OperationFacts& f : kOperationFacts) {
    const Operation op = f.op;
    if (!IsMutation(op) || !HasResult(op)) continue;
    Reader r(raw, depth);
    absl::StatusOr<Result> res = DecodeResultAt(op, r, p);
    if (!res.ok()) continue;
    std::optional<MutationResult> m = ToMutationResult(std::move(*res));
    if (m.has_value()) return *std::move(m);
  }
  return Invalid(p, "not the result of a mutation");
}

}  // namespace

absl::StatusOr<Result> DecodeResultAt(Operation op, Reader& r, const Path& p) {
  switch (op) {
#define SN_OPERATION(e, field, args, result, mutation, slot) \
  case Operation::k##e: return Decode##result##Result(r, p);
#define SN_AGENT_OPERATION SN_OPERATION
#include "common/operations.def"
  }
  return Invalid(p, "this operation has no result");
}

absl::StatusOr<RecordedResponse> DecodeRecordedAt(std::optional<Operation> op, Reader& r,
                                                  const Path& p) {
  using enum RecordedMember;
  Members<RecordedMember> t(p);
  RecordedResponse rec;
  std::string_view result_raw;
  int result_depth = 0;
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](RecordedMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kId: {
            ASSIGN_OR_RETURN(rec.id, ReadUuid(v, mp));
            break;
          }
          case kResult: {
            RETURN_IF_ERROR(ExpectType(v, mp, json::ValueType::kObject));
            result_depth = v.depth();
            ASSIGN_OR_RETURN(result_raw, v.Capture());
            break;
          }
          case kErrorCode: {
            ASSIGN_OR_RETURN(rec.error_code, ReadErrorCode(v, mp));
            break;
          }
          case kInfo: return DecodeInfo(v, mp, &rec.create_settled);
          case kUnsupported: return DecodeUnsupported(v, mp, &rec.unsupported);
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kId}));
  RETURN_IF_ERROR(
      CheckOutcome(p, t.Has(kResult), rec.error_code, t.Has(kInfo), t.Has(kUnsupported)));
  const Path rp = p.Member(t.name(kResult));
  if (op) {
    if (t.Has(kResult) && !HasResult(*op)) return Invalid(rp, "this operation has no result");
    if (!t.Has(kResult) && !rec.error_code && HasResult(*op)) {
      return Invalid(p, "missing member 'result' (a success of an operation with a result)");
    }
  }
  if (t.Has(kResult)) {
    if (op) {
      Reader rr(result_raw, result_depth);
      ASSIGN_OR_RETURN(Result res, DecodeResultAt(*op, rr, rp));
      rec.result = ToMutationResult(std::move(res));
    } else {
      ASSIGN_OR_RETURN(rec.result, InferMutationResult(result_raw, result_depth, rp));
    }
  }
  return rec;
}

absl::StatusOr<Response> DecodeResponse(const std::vector<RawMember>& m) {
  using enum ResponseMember;
  const Path p = Root("response");
  Members<ResponseMember> t(p);
  Response resp;
  RETURN_IF_ERROR(ForEachRawMember(
      m, p, t, [&](ResponseMember member, Reader& v, const Path& mp) -> absl::Status {
        switch (member) {
          case kType:
          case kVersion: break;
          case kId: {
            ASSIGN_OR_RETURN(resp.id, ReadUuid(v, mp));
            break;
          }
          case kConnectionId: {
            ASSIGN_OR_RETURN(resp.connection_id, ReadUuid(v, mp));
            break;
          }
          case kResult: {
            RETURN_IF_ERROR(ExpectType(v, mp, json::ValueType::kObject));
            ASSIGN_OR_RETURN(std::string_view raw, v.Capture());
            resp.raw_result = std::string(raw);
            break;
          }
          case kErrorCode: {
            ASSIGN_OR_RETURN(resp.error_code, ReadErrorCode(v, mp));
            break;
          }
          case kInfo: return DecodeInfo(v, mp, &resp.create_settled);
          case kUnsupported: return DecodeUnsupported(v, mp, &resp.unsupported);
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kId, kConnectionId}));
  RETURN_IF_ERROR(
      CheckOutcome(p, t.Has(kResult), resp.error_code, t.Has(kInfo), t.Has(kUnsupported)));
  return resp;
}

}  // namespace sn::wire::internal

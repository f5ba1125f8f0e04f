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

absl::StatusOr<std::string> ReadErrorCode(Reader& r, const Path& p) {
  ASSIGN_OR_RETURN(int i, ReadEnum(r, p, kErrorCodes));
  return std::string(kErrorCodes[i]);
}

absl::Status DecodeSettled(Reader& r, const Path& p, CreateSettled* c) {
  static constexpr std::string_view kNames[] = {"request_id", "sandbox_id", "native_id",
                                                "generation", "specification_digest"};
  MemberTable t(p, kNames);
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(c->request_id, ReadUuid(v, mp)); break; }
      case 1: { ASSIGN_OR_RETURN(c->sandbox_id, ReadUuid(v, mp)); break; }
      case 2: { ASSIGN_OR_RETURN(c->native_id, ReadBoundedString(v, mp, kMaxNativeIdBytes)); break; }
      case 3: { ASSIGN_OR_RETURN(c->generation, ReadPositive(v, mp)); break; }
      default: { ASSIGN_OR_RETURN(c->specification_digest, ReadDigest(v, mp)); }
    }
    return absl::OkStatus();
  }));
  return t.Require({0, 1, 2, 3, 4});
}

absl::Status DecodeInfo(Reader& r, const Path& p, std::optional<CreateSettled>* out) {
  static constexpr std::string_view kNames[] = {"create_settled"};
  MemberTable t(p, kNames);
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int, Reader& v, const Path& mp) -> absl::Status {
    out->emplace();
    return DecodeSettled(v, mp, &**out);
  }));
  return t.Require({0});
}

absl::Status DecodeUnsupported(Reader& r, const Path& p, std::optional<Unsupported>* out) {
  static constexpr std::string_view kNames[] = {"operation", "reason"};
  MemberTable t(p, kNames);
  Unsupported u;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    if (i == 0) {
      ASSIGN_OR_RETURN(std::string_view s, ReadString(v, mp));
      u.operation = std::string(s);
    } else {
      ASSIGN_OR_RETURN(u.reason, ReadBoundedString(v, mp, kMaxUnsupportedReasonBytes));
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 1}));
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
  static constexpr std::string_view kNames[] = {"sandbox_id", "native_id", "state"};
  MemberTable t(p, kNames);
  std::string sandbox_id;
  std::optional<std::string> native_id;
  int state = 0;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(sandbox_id, ReadUuid(v, mp)); break; }
      case 1: { ASSIGN_OR_RETURN(native_id, ReadBoundedString(v, mp, kMaxNativeIdBytes)); break; }
      default: { ASSIGN_OR_RETURN(state, ReadEnum(v, mp, kSandboxStates)); }
    }
    return absl::OkStatus();
  }));
  const SandboxState s = static_cast<SandboxState>(state);
  if (op == Operation::kInspect) {
    RETURN_IF_ERROR(t.Require({0, 2}));
    if ((s != SandboxState::kAbsent) != native_id.has_value()) {
      return Invalid(p, "native_id must be present exactly when state is not \"absent\"");
    }
    return Result(InspectResult{std::move(sandbox_id), s, std::move(native_id)});
  }
  RETURN_IF_ERROR(t.Require({0, 1, 2}));
  if (op == Operation::kCreate) {
    if (s != SandboxState::kRunning) return Invalid(p.Member("state"), "must be \"running\"");
    return Result(CreateResult{std::move(sandbox_id), std::move(*native_id)});
  }
  if (s == SandboxState::kAbsent) return Invalid(p.Member("state"), "must be \"running\" or \"retained\"");
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
  static constexpr std::string_view kNames[] = {"exit_code", "stdout", "stderr", "truncated"};
  MemberTable t(p, kNames);
  ExecResult e;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(e.exit_code, ReadInt64(v, mp)); break; }
      case 1: return ReadBase64(v, mp, static_cast<size_t>(kMaxOutputLimitBytes), &e.stdout_bytes);
      case 2: return ReadBase64(v, mp, static_cast<size_t>(kMaxOutputLimitBytes), &e.stderr_bytes);
      default: { ASSIGN_OR_RETURN(e.truncated, ReadBool(v, mp)); }
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 1, 2, 3}));
  if (e.stdout_bytes.size() + e.stderr_bytes.size() > static_cast<size_t>(kMaxOutputLimitBytes)) {
    return Invalid(p, "stdout and stderr together exceed the output limit");
  }
  return Result(std::move(e));
}

absl::StatusOr<Result> DecodeWriteFileResult(Reader& r, const Path& p) {
  static constexpr std::string_view kNames[] = {"size"};
  MemberTable t(p, kNames);
  WriteFileResult w;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int, Reader& v, const Path& mp) -> absl::Status {
    ASSIGN_OR_RETURN(w.size, ReadInt64InRange(v, mp, 0, INT64_MAX));
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0}));
  return Result(w);
}

absl::StatusOr<Result> DecodeReadFileResult(Reader& r, const Path& p) {
  static constexpr std::string_view kNames[] = {"content", "size", "truncated"};
  MemberTable t(p, kNames);
  ReadFileResult f;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: return ReadBase64(v, mp, static_cast<size_t>(kMaxReadFileBytes), &f.content);
      case 1: { ASSIGN_OR_RETURN(f.size, ReadInt64InRange(v, mp, 0, INT64_MAX)); break; }
      default: { ASSIGN_OR_RETURN(f.truncated, ReadBool(v, mp)); }
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 1, 2}));
  const uint64_t size = static_cast<uint64_t>(f.size);
  if (f.content.size() > size || f.truncated != (size > f.content.size())) {
    return Invalid(p, "content, size and truncated disagree");
  }
  return Result(std::move(f));
}

absl::StatusOr<Result> DecodeObserveResult(Reader& r, const Path& p) {
  static constexpr std::string_view kNames[] = {"operation_id", "operation", "state", "response"};
  static constexpr std::string_view kStates[] = {"queued", "running", "completed", "unknown"};
  MemberTable t(p, kNames);
  ObserveResult o;
  std::string_view response_raw;
  int response_depth = 0;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(o.operation_id, ReadUuid(v, mp)); break; }
      case 1: {
        ASSIGN_OR_RETURN(std::string_view s, ReadString(v, mp));
        o.operation = std::string(s);
        break;
      }
      case 2: {
        ASSIGN_OR_RETURN(int s, ReadEnum(v, mp, kStates));
        o.state = static_cast<ObserveState>(s);
        break;
      }
      default: {
        RETURN_IF_ERROR(ExpectType(v, mp, json::ValueType::kObject));
        response_depth = v.depth();
        ASSIGN_OR_RETURN(response_raw, v.Capture());
      }
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 2}));
  const bool unknown = o.state == ObserveState::kUnknown;
  if (unknown == t.Has(1)) {
    return Invalid(p, "operation must be present exactly when state is not \"unknown\"");
  }
  if ((o.state == ObserveState::kCompleted) != t.Has(3)) {
    return Invalid(p, "response must be present exactly when state is \"completed\"");
  }
  std::optional<Operation> op;
  if (o.operation) {
    op = ParseOperation(*o.operation);
    if (!op || !IsMutation(*op)) return Invalid(p.Member("operation"), "not a mutation operation");
  }
  if (t.Has(3)) {
    Reader rr(response_raw, response_depth);
    const Path rp = p.Member("response");
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
  static constexpr std::string_view kNames[] = {"id", "result", "error_code", "info",
                                                "unsupported"};
  MemberTable t(p, kNames);
  RecordedResponse rec;
  std::string_view result_raw;
  int result_depth = 0;
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(rec.id, ReadUuid(v, mp)); break; }
      case 1: {
        RETURN_IF_ERROR(ExpectType(v, mp, json::ValueType::kObject));
        result_depth = v.depth();
        ASSIGN_OR_RETURN(result_raw, v.Capture());
        break;
      }
      case 2: { ASSIGN_OR_RETURN(rec.error_code, ReadErrorCode(v, mp)); break; }
      case 3: return DecodeInfo(v, mp, &rec.create_settled);
      default: return DecodeUnsupported(v, mp, &rec.unsupported);
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0}));
  RETURN_IF_ERROR(CheckOutcome(p, t.Has(1), rec.error_code, t.Has(3), t.Has(4)));
  const Path rp = p.Member("result");
  if (op) {
    if (t.Has(1) && !HasResult(*op)) return Invalid(rp, "this operation has no result");
    if (!t.Has(1) && !rec.error_code && HasResult(*op)) {
      return Invalid(p, "missing member 'result' (a success of an operation with a result)");
    }
  }
  if (t.Has(1)) {
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
  static constexpr std::string_view kNames[] = {"type",   "version",    "id",   "connection_id",
                                                "result", "error_code", "info", "unsupported"};
  const Path p = Root("response");
  MemberTable t(p, kNames);
  Response resp;
  RETURN_IF_ERROR(ForEachRawMember(m, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 2: { ASSIGN_OR_RETURN(resp.id, ReadUuid(v, mp)); break; }
      case 3: { ASSIGN_OR_RETURN(resp.connection_id, ReadUuid(v, mp)); break; }
      case 4: {
        RETURN_IF_ERROR(ExpectType(v, mp, json::ValueType::kObject));
        ASSIGN_OR_RETURN(std::string_view raw, v.Capture());
        resp.raw_result = std::string(raw);
        break;
      }
      case 5: { ASSIGN_OR_RETURN(resp.error_code, ReadErrorCode(v, mp)); break; }
      case 6: return DecodeInfo(v, mp, &resp.create_settled);
      case 7: return DecodeUnsupported(v, mp, &resp.unsupported);
      default: break;
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({2, 3}));
  RETURN_IF_ERROR(CheckOutcome(p, t.Has(4), resp.error_code, t.Has(6), t.Has(7)));
  return resp;
}

}  // namespace sn::wire::internal
